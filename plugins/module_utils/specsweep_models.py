"""Cheap integrity checks of local model files (stdlib only): headers and sizes, never the weights.

A GGUF file (llama.cpp) must hold its whole header (metadata and tensor list) and every tensor its
header places; a Hugging Face checkpoint folder (SGLang) needs a config.json that parses and, for
each safetensors weight file (those the index names, else those present), a header that parses and
the data it describes. Each check returns the model's identity: size, mtime and a digest of the
small part that names it (GGUF header, config.json).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct

# GGUF metadata value types: struct format of the fixed-size ones; 8 is a string, 9 an array.
GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
# ggml tensor types: (elements per block, bytes per block), from ggml's type traits (gguf-py
# GGML_QUANT_SIZES). A type not listed here only has its offset checked.
GGML_BLOCKS = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110),
    22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
    29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17),
}  # fmt: skip
GGUF_DEFAULT_ALIGNMENT = 32


class ModelCorrupt(Exception):
    """A model that cannot load: `subject` (the file) and `detail` (what is wrong), for a sentence."""

    def __init__(self, subject: str, detail: str):
        super().__init__(f"{subject} {detail}")
        self.subject = subject
        self.detail = detail


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB ({n} bytes)" if n >= 1_000_000 else f"{n} bytes"


def _truncated(subject: str, size: int, rest: str) -> ModelCorrupt:
    return ModelCorrupt(subject, f"is truncated: it is {_size(size)}{rest}")


class _Header:
    """A bounds-checked cursor over a GGUF file's header."""

    def __init__(self, data: mmap.mmap, subject: str):
        self.data, self.subject, self.pos = data, subject, 0

    def take(self, n: int) -> int:
        """Skip `n` bytes; returns where they start."""
        if self.pos + n > len(self.data):
            raise _truncated(
                self.subject, len(self.data), " and ends inside its GGUF header (metadata, tensor list)"
            )
        start, self.pos = self.pos, self.pos + n
        return start

    def unpack(self, fmt: str):
        return struct.unpack_from("<" + fmt, self.data, self.take(struct.calcsize("<" + fmt)))[0]

    def string(self) -> bytes:
        n = self.unpack("Q")
        start = self.take(n)
        return self.data[start : start + n]

    def value(self, vtype: int):
        """Read one metadata value; arrays are skipped (None)."""
        if vtype in GGUF_SCALARS:
            return self.unpack(GGUF_SCALARS[vtype])
        if vtype == GGUF_STRING:
            return self.string()
        if vtype != GGUF_ARRAY:
            raise ModelCorrupt(
                self.subject, f"is corrupt: unknown GGUF value type {vtype} at byte {self.pos}"
            )
        etype, count = self.unpack("I"), self.unpack("Q")
        if etype in GGUF_SCALARS:
            self.take(count * struct.calcsize(GGUF_SCALARS[etype]))
            return None
        # A string takes 8 bytes at least, an array 12: a count the file cannot hold ends here.
        self.take(0 if count * 8 <= len(self.data) - self.pos else count * 8)
        for _ in range(count):
            self.value(etype)
        return None


def check_gguf(path: str) -> dict:
    """Identity of a GGUF file whose header and tensor data are complete; raises ModelCorrupt."""
    subject = f"model file {path}"
    st = os.stat(path)
    if st.st_size < 24:
        raise _truncated(subject, st.st_size, ", shorter than a GGUF header (24 bytes)")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        h = _Header(data, subject)
        magic = data[:4]
        if magic != b"GGUF":
            raise ModelCorrupt(subject, f"is not a GGUF file: it starts with {magic!r}, not b'GGUF'")
        h.take(4)
        version = h.unpack("I")
        if version not in (2, 3):
            raise ModelCorrupt(subject, f"has GGUF version {version}; llama.cpp reads versions 2 and 3")
        n_tensors, n_kv = h.unpack("Q"), h.unpack("Q")
        alignment = GGUF_DEFAULT_ALIGNMENT
        for _ in range(n_kv):
            key = h.string()
            value = h.value(h.unpack("I"))
            if key == b"general.alignment":
                alignment = value
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise ModelCorrupt(subject, f"is corrupt: general.alignment is {alignment!r}, not a power of 2")
        tensors_end = 0
        for _ in range(n_tensors):
            h.string()
            n_dims = h.unpack("I")
            if n_dims > 8:
                raise ModelCorrupt(subject, f"is corrupt: a tensor with {n_dims} dimensions at byte {h.pos}")
            elements = 1
            for _ in range(n_dims):
                elements *= h.unpack("Q")
            ttype, offset = h.unpack("I"), h.unpack("Q")
            block_elements, block_bytes = GGML_BLOCKS.get(ttype, (1, 0))
            tensors_end = max(tensors_end, offset + elements // block_elements * block_bytes)
        header_end = h.pos
        need = -(-header_end // alignment) * alignment + tensors_end
        if need > st.st_size:
            raise _truncated(subject, st.st_size, f" but its tensors end at {_size(need)}")
        digest = hashlib.sha256(data[:header_end]).hexdigest()
    return {"path": path, "bytes": st.st_size, "mtime": st.st_mtime, "digest": digest}


def check_safetensors(path: str) -> int:
    """The size of a safetensors file whose header parses and whose data is complete; raises ModelCorrupt."""
    subject = f"weight file {path}"
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _truncated(subject, size, ", shorter than a safetensors header (8 bytes)")
        (n,) = struct.unpack("<Q", head)
        if 8 + n > size:
            raise _truncated(subject, size, f" but its safetensors header ends at {_size(8 + n)}")
        try:
            header = json.loads(f.read(n))
            ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
            data_end = max([0, *(int(end) for end in ends)])
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            raise ModelCorrupt(subject, f"is corrupt: its safetensors header does not parse ({exc})") from exc
    if 8 + n + data_end > size:
        raise _truncated(subject, size, f" but its tensors end at {_size(8 + n + data_end)}")
    return size


def check_hf_folder(path: str) -> dict:
    """Identity of a checkpoint folder whose config and weight files check out; raises ModelCorrupt."""
    subject = f"model folder {path}"
    config = os.path.join(path, "config.json")
    try:
        with open(config, "rb") as f:
            config_bytes = f.read()
        json.loads(config_bytes)
    except FileNotFoundError as exc:
        raise ModelCorrupt(subject, "has no config.json") from exc
    except (OSError, ValueError) as exc:
        raise ModelCorrupt(subject, f"has a config.json that does not parse ({exc})") from exc
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        try:
            with open(index, encoding="utf-8") as f:
                weights = sorted(set(json.load(f)["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelCorrupt(
                subject, f"has a model.safetensors.index.json that does not parse ({exc})"
            ) from exc
    else:
        weights = sorted(name for name in os.listdir(path) if name.endswith(".safetensors"))
    for name in weights:
        weight = os.path.join(path, name)
        if not os.path.isfile(weight):
            raise ModelCorrupt(subject, f"lacks {name}, a weight file its model.safetensors.index.json names")
        check_safetensors(weight)
    files = [e.stat() for e in os.scandir(path) if e.is_file()]
    return {
        "path": path,
        "bytes": sum(st.st_size for st in files),
        "mtime": max([os.stat(path).st_mtime, *(st.st_mtime for st in files)]),
        "digest": hashlib.sha256(config_bytes).hexdigest(),
    }


def check_model(path: str, fmt: str | None) -> dict:
    """What is known of one model: status (ok, not_checked, model_not_found, model_corrupt), the
    ModelCorrupt when corrupt, and its identity (empty values when there is none)."""
    unknown = {"path": path, "bytes": None, "mtime": None, "digest": None}
    if not path.startswith("/"):
        return {"status": "not_checked", "corrupt": None, "identity": unknown}  # a Hugging Face repo id
    if not os.path.exists(path):
        return {"status": "model_not_found", "corrupt": None, "identity": unknown}
    fmt = fmt or ("hf" if os.path.isdir(path) else "gguf")
    try:
        if fmt == "hf" and not os.path.isdir(path):
            raise ModelCorrupt(f"model path {path}", "is a file, not a checkpoint folder")
        if fmt == "gguf" and os.path.isdir(path):
            raise ModelCorrupt(f"model path {path}", "is a folder, not a GGUF file")
        identity = check_hf_folder(path) if fmt == "hf" else check_gguf(path)
    except ModelCorrupt as exc:
        return {"status": "model_corrupt", "corrupt": exc, "identity": unknown}
    except OSError as exc:
        corrupt = ModelCorrupt(f"model path {path}", f"cannot be read ({exc})")
        return {"status": "model_corrupt", "corrupt": corrupt, "identity": unknown}
    return {"status": "ok", "corrupt": None, "identity": identity}
