"""The model checks of preflight (plugins/module_utils/specsweep_models.py) on files written here: a
small GGUF file laid out as llama.cpp writes them, safetensors checkpoints; and the problems and
identities specsweep_host_facts returns for them."""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from pathlib import Path

from module_runner import module_utils, run_module

models = module_utils("specsweep_models")

ALIGNMENT = 64


def gguf_string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def kv(key: bytes, vtype: int, payload: bytes) -> bytes:
    return gguf_string(key) + struct.pack("<I", vtype) + payload


def tensor_info(name: bytes, dims: tuple[int, ...], ggml_type: int, offset: int) -> bytes:
    return gguf_string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, ggml_type, offset)


def write_gguf(path: Path) -> int:
    """A GGUF v3 file: scalar, string and (nested) array metadata, general.alignment 64, an F32
    tensor (8x4: 128 bytes) and a Q8_0 one (64x2: 4 blocks of 34 bytes); returns its header size."""
    pairs = [
        kv(b"general.architecture", 8, gguf_string(b"llama")),
        kv(b"general.alignment", 4, struct.pack("<I", ALIGNMENT)),
        kv(
            b"tokenizer.ggml.tokens",
            9,
            struct.pack("<IQ", 8, 3) + b"".join(map(gguf_string, [b"a", b"bb", b"c"])),
        ),
        kv(b"tokenizer.ggml.scores", 9, struct.pack("<IQ3f", 6, 3, 0.1, 0.2, 0.3)),
        kv(b"test.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ2I", 4, 2, 1, 2)),
    ]
    tensors = tensor_info(b"a.weight", (8, 4), 0, 0) + tensor_info(b"b.weight", (64, 2), 8, 128)
    for pad in range(ALIGNMENT):
        # Padding metadata puts the header end 16 bytes past a multiple of 64: the data then starts
        # 32 bytes later than the default alignment (32) would put it, so ignoring the key shows.
        pairs_now = [*pairs, kv(b"test.pad", 8, gguf_string(b"x" * pad))]
        header = b"GGUF" + struct.pack("<IQQ", 3, 2, len(pairs_now)) + b"".join(pairs_now) + tensors
        if len(header) % ALIGNMENT == 16:
            break
    data_start = len(header) + ALIGNMENT - 16
    path.write_bytes(header + b"\0" * (data_start - len(header)) + b"\1" * (128 + 4 * 34))
    return len(header)


def truncate(path: Path, size: int) -> None:
    path.write_bytes(path.read_bytes()[:size])


def test_a_complete_gguf_file_passes_with_its_identity(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    header = write_gguf(path)
    found = models.check_model(str(path), "gguf")
    assert (found["status"], found["corrupt"]) == ("ok", None)
    raw = path.read_bytes()
    assert found["identity"] == {"path": str(path), "bytes": len(raw), "mtime": path.stat().st_mtime,
                                 "digest": hashlib.sha256(raw[:header]).hexdigest()}  # fmt: skip


def test_a_gguf_file_one_byte_short_is_truncated_with_both_sizes(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_gguf(path)
    size = path.stat().st_size
    truncate(path, size - 1)
    found = models.check_model(str(path), "gguf")
    assert found["status"] == "model_corrupt"
    assert str(found["corrupt"]) == (
        f"model file {path} is truncated: it is {size - 1} bytes but its tensors end at {size} bytes"
    )


def test_a_gguf_file_cut_in_its_metadata_is_truncated(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_gguf(path)
    truncate(path, 100)
    found = models.check_model(str(path), None)  # a file: GGUF by default
    assert found["status"] == "model_corrupt"
    assert (
        found["corrupt"].detail
        == "is truncated: it is 100 bytes and ends inside its GGUF header (metadata, tensor list)"
    )


def test_a_file_that_is_not_gguf_is_named_so(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"<html>not found</html>" + b" " * 100)
    found = models.check_model(str(path), "gguf")
    assert found["corrupt"].detail == "is not a GGUF file: it starts with b'<htm', not b'GGUF'"


def safetensors(path: Path, tensors: dict[str, int]) -> None:
    """A safetensors file holding tensors of the given byte sizes, one after the other."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, size in tensors.items():
        header[name] = {"dtype": "U8", "shape": [size], "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\7" * offset)


def checkpoint(folder: Path, sharded: bool = True) -> Path:
    """A checkpoint folder: config.json and two shards with their index, or one model.safetensors."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    if not sharded:
        safetensors(folder / "model.safetensors", {"w1": 16, "w2": 40})
        return folder
    shards = {"w1": "model-00001-of-00002.safetensors", "w2": "model-00002-of-00002.safetensors"}
    for name, shard in shards.items():
        safetensors(folder / shard, {name: 24})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    return folder


def test_complete_checkpoint_folders_pass_with_the_digest_of_their_config(tmp_path: Path) -> None:
    for folder in (checkpoint(tmp_path / "sharded"), checkpoint(tmp_path / "single", sharded=False)):
        found = models.check_model(str(folder), None)  # a folder: hf by default
        assert found["status"] == "ok", found
        assert (
            found["identity"]["digest"] == hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
        )
        assert found["identity"]["bytes"] == sum(p.stat().st_size for p in folder.iterdir())


def test_broken_checkpoint_folders_are_corrupt_and_say_how(tmp_path: Path) -> None:
    cut = checkpoint(tmp_path / "cut")
    shard = cut / "model-00002-of-00002.safetensors"
    size = shard.stat().st_size
    truncate(shard, size - 4)
    garbled = checkpoint(tmp_path / "garbled", sharded=False)
    raw = (garbled / "model.safetensors").read_bytes()
    (garbled / "model.safetensors").write_bytes(raw[:8] + b"{" * (len(raw) - 8))
    lacking = checkpoint(tmp_path / "lacking")
    (lacking / "model-00001-of-00002.safetensors").unlink()
    no_config = checkpoint(tmp_path / "no-config")
    (no_config / "config.json").write_text("{")
    found = {
        folder.name: models.check_model(str(folder), "hf") for folder in (cut, garbled, lacking, no_config)
    }
    assert {name: f["status"] for name, f in found.items()} == dict.fromkeys(found, "model_corrupt")
    assert str(found["cut"]["corrupt"]) == (
        f"weight file {shard} is truncated: it is {size - 4} bytes but its tensors end at {size} bytes"
    )
    assert str(found["garbled"]["corrupt"]).startswith(
        f"weight file {garbled / 'model.safetensors'} is corrupt: its safetensors header does not parse"
    )
    assert str(found["lacking"]["corrupt"]) == (
        f"model folder {lacking} lacks model-00001-of-00002.safetensors, a weight file its "
        "model.safetensors.index.json names"
    )
    assert found["no-config"]["corrupt"].detail.startswith("has a config.json that does not parse")


def test_host_facts_names_each_problem_in_a_sentence_and_returns_model_identities(tmp_path: Path) -> None:
    good, cut = tmp_path / "good.gguf", tmp_path / "cut.gguf"
    write_gguf(good)
    write_gguf(cut)
    truncate(cut, cut.stat().st_size - 1)
    folder = checkpoint(tmp_path / "ckpt")
    (folder / "model-00002-of-00002.safetensors").unlink()
    missing = tmp_path / "missing.gguf"
    result = run_module("specsweep_host_facts", {
        "hardware": False, "label": "gpu-node-7", "python": sys.executable,
        "imports": ["specsweep_no_such_module"], "paths": [str(tmp_path / "launcher.py")],
        "models": [{"path": str(good)}, {"path": str(cut), "format": "gguf"}, {"path": str(missing)},
                   {"path": "Qwen/Qwen3-8B", "format": "hf"}, {"path": str(folder), "format": "hf"}],
    })  # fmt: skip
    cut_size = cut.stat().st_size
    assert result["problems"] == [
        f"{sys.executable} cannot import specsweep_no_such_module on gpu-node-7: "
        "ModuleNotFoundError: No module named 'specsweep_no_such_module'",
        f"path {tmp_path / 'launcher.py'} does not exist on gpu-node-7",
        f"model_corrupt: model file {cut} on gpu-node-7 is truncated: it is {cut_size} bytes but its "
        f"tensors end at {cut_size + 1} bytes",
        f"model_not_found: model path {missing} does not exist on gpu-node-7",
        f"model_corrupt: model folder {folder} on gpu-node-7 lacks model-00002-of-00002.safetensors, a "
        "weight file its model.safetensors.index.json names",
    ]
    statuses = {path: m["status"] for path, m in result["installed"]["models"].items()}
    assert statuses == {str(good): "ok", str(cut): "model_corrupt", str(missing): "model_not_found",
                        "Qwen/Qwen3-8B": "not_checked", str(folder): "model_corrupt"}  # fmt: skip
    assert result["installed"]["missing_paths"] == [str(tmp_path / "launcher.py"), str(missing)]
    assert result["installed"]["complete"] is False
    identities = result["model_identity"]
    assert [i["path"] for i in identities] == [
        str(good),
        str(cut),
        str(missing),
        "Qwen/Qwen3-8B",
        str(folder),
    ]
    assert identities[0]["bytes"] == good.stat().st_size and len(identities[0]["digest"]) == 64
    assert all(i["digest"] is None for i in identities[1:])
