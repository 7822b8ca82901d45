"""The fact schema: what it accepts, what it refuses and how it says so, on both ways in (bytes, dicts)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from factories import config, fact, run

from analysis.facts.schema import Engine, Fact, ModelIdentity, SchemaError, decode_fact, load_fact, to_dict

OLD_FACT = Path(__file__).parent / "fixtures" / "facts" / "t2probe" / "localhost" / "s2.json"


def document() -> dict[str, Any]:
    """A valid fact document as the writer writes it."""
    return to_dict(fact(config(2), [run([90.0, 91.0])]))


def from_bytes(doc: Any) -> Fact:
    """The report's way in: the file's bytes, decoded straight into a Fact."""
    return decode_fact(json.dumps(doc).encode())


WAYS_IN: list[Callable[[Any], Fact]] = [load_fact, from_bytes]


def changed(path: str, value: Any) -> dict[str, Any]:
    """The document with one field (a dotted path, list indexes as numbers) set, or removed when `...`."""
    doc = copy.deepcopy(document())
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node = doc
    for key in parents:
        node = node[key]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return doc


def test_a_fact_written_before_adaptive_and_model_identity_existed_still_loads() -> None:
    raw = OLD_FACT.read_bytes()
    doc = json.loads(raw)
    assert "adaptive" not in doc["config"] and "model_identity" not in doc["engine"], "fixture changed"
    loaded = load_fact(doc)
    assert decode_fact(raw) == loaded
    assert (loaded.config.id, loaded.config.adaptive, loaded.engine.model_identity) == ("s2", False, None)
    assert len(loaded.runs) == len(doc["runs"])


def test_model_identity_survives_the_write_and_both_readers() -> None:
    identity = ModelIdentity(path="/data/models/Kimi-K2.5", bytes=123, mtime=1.5e9, digest="sha256:ab")
    engine = Engine(name="sglang", model="Kimi-K2.5", launcher="nohup", model_identity=identity)
    written = fact(config(2), [run([90.0])], engine=engine)
    doc = json.loads(json.dumps(to_dict(written)))
    assert doc["engine"]["model_identity"] == {"path": "/data/models/Kimi-K2.5", "bytes": 123,
                                               "mtime": 1.5e9, "digest": "sha256:ab"}  # fmt: skip
    assert [way(doc) for way in WAYS_IN] == [written, written]


@pytest.mark.parametrize("way", WAYS_IN, ids=["dict", "bytes"])
def test_an_integer_is_taken_for_a_float(way: Callable[[Any], Fact]) -> None:
    duration = way(changed("runs.0.duration_s", 12)).runs[0].duration_s
    assert (duration, type(duration)) == (12.0, float)


@pytest.mark.parametrize("way", WAYS_IN, ids=["dict", "bytes"])
@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("runs.0.repeat", True, "$.runs[0].repeat: expected `int`, got `bool`"),
        ("runs.0.duration_s", False, "$.runs[0].duration_s: expected `float`, got `bool`"),
        ("runs.0.requests.1.ttft_s", "0.5", "$.runs[0].requests[1].ttft_s: expected `float`, got `str`"),
        ("runs.0.spec.tokens", 3, "$.runs[0].spec: object contains unknown field `tokens`"),
        ("engine.launcher", ..., "$.engine: object missing required field `launcher`"),
        ("engine.name", "tgi", "$.engine.name: invalid enum value 'tgi'"),
        ("config.steps", 3, "$.config: config id 's2' does not name its fields (they make 's3')"),
        ("schema_version", 99, "schema_version 99 is not supported (this analysis reads 1)"),
        ("schema_version", ..., "schema_version None is not supported (this analysis reads 1)"),
    ],
)
def test_a_wrong_document_is_refused_naming_the_field(
    way: Callable[[Any], Fact], path: str, value: Any, message: str
) -> None:
    with pytest.raises(SchemaError) as refused:
        way(changed(path, value))
    assert str(refused.value) == message


def test_bytes_that_are_not_json_are_refused_as_such() -> None:
    with pytest.raises(ValueError, match=r"^not valid JSON: "):
        decode_fact(b'{"sweep_id": "s')
    with pytest.raises(SchemaError, match=r"^\$: expected an object"):
        decode_fact(b"[1, 2]")
