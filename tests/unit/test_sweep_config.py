"""One sweep config (analysis.sweep.config): its id and the parser that reads it back, the struct that
refuses an id not naming its fields, and the columns every table takes from it."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from analysis.sweep import config
from analysis.sweep.config import Config, config_id, make, parse_id

# (id, the fields it names) for every form an id takes.
IDS: list[tuple[str, dict[str, Any]]] = [
    ("baseline", {"speculative": False}),
    ("s2", {"speculative": True, "steps": 2}),
    ("s12", {"speculative": True, "steps": 12}),
    ("s2-k1-d3", {"speculative": True, "steps": 2, "topk": 1, "draft_tokens": 3}),
    ("s5-k4-d8", {"speculative": True, "steps": 5, "topk": 4, "draft_tokens": 8}),
    ("s2-k2", {"speculative": True, "steps": 2, "topk": 2}),
    ("adaptive", {"speculative": True, "adaptive": True}),
    ("baseline+nccl_ll", {"speculative": False, "env_profile": "nccl_ll"}),
    ("s2+nccl_ll_ring", {"speculative": True, "steps": 2, "env_profile": "nccl_ll_ring"}),
    (
        "s5-k4-d8+p.v-1",
        {"speculative": True, "steps": 5, "topk": 4, "draft_tokens": 8, "env_profile": "p.v-1"},
    ),
    ("adaptive+lean", {"speculative": True, "adaptive": True, "env_profile": "lean"}),
    ("s2-ov1", {"speculative": True, "steps": 2, "overlap_schedule": True}),
    (
        "s2-k1-d3-ov0+fast",
        {
            "speculative": True,
            "steps": 2,
            "topk": 1,
            "draft_tokens": 3,
            "overlap_schedule": False,
            "env_profile": "fast",
        },
    ),
]
UNSET = {"algorithm": None, "steps": None, "topk": None, "draft_tokens": None, "overlap_schedule": None,
         "adaptive": False, "env_profile": "default"}  # fmt: skip


@pytest.mark.parametrize(("text", "fields"), IDS)
def test_parse_id_reads_back_every_id_form(text: str, fields: dict[str, Any]) -> None:
    parsed = parse_id(text)
    assert parsed == {"id": text, **UNSET, **fields}
    # ... and the id is what config_id makes of those fields, and a valid Config.
    assert config_id(parsed["steps"], parsed["topk"], parsed["draft_tokens"], parsed["env_profile"],
                     parsed["speculative"], parsed["adaptive"],
                     overlap_schedule=parsed["overlap_schedule"]) == text  # fmt: skip
    assert Config(**parsed).id == text


def test_every_config_of_a_grid_round_trips_through_its_id() -> None:
    profiles = ["default", "fast"]
    configs, _ = config.grid(
        {"steps": [1, 2, 3], "topk": [1, 2], "draft_tokens": [3, 4, 5], "overlap_schedule": [False, True]},
        algorithm="EAGLE3",
        env_profiles=profiles,
        engines=("sglang",),
    )
    assert len(configs) > 10
    for c in configs:
        assert Config(**{**parse_id(c.id), "algorithm": c.algorithm}) == c


@pytest.mark.parametrize(
    "text",
    ["", "s", "sx", "S2", "s2-k", "s2-k2-d", "baseline-k2", "adaptive-k2", "s2 ", "s2+", "s2+-x", "x2"],
)
def test_parse_id_refuses_what_is_not_an_id(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not baseline, s<steps> or s<steps>-k<topk>-d<draft>"):
        parse_id(text)


def test_config_id_names_each_form() -> None:
    assert [
        config_id(None),
        config_id(2),
        config_id(5, 4, 8),
        config_id(2, env_profile="fast"),
        config_id(None, env_profile="fast"),
        config_id(3, adaptive=True),
        config_id(3, adaptive=True, env_profile="fast"),
    ] == ["baseline", "s2", "s5-k4-d8", "s2+fast", "baseline+fast", "adaptive", "adaptive+fast"]


@pytest.mark.parametrize(
    ("fields", "made"),
    [
        ({"id": "s3", "speculative": True, "steps": 2}, "s2"),
        ({"id": "s2", "speculative": True, "steps": 2, "topk": 1, "draft_tokens": 3}, "s2-k1-d3"),
        ({"id": "s2", "speculative": True, "steps": 2, "env_profile": "fast"}, "s2+fast"),
        ({"id": "baseline+fast", "speculative": False}, "baseline"),
        ({"id": "s2", "speculative": True, "steps": 2, "adaptive": True}, "adaptive"),
    ],
)
def test_a_config_refuses_an_id_that_does_not_name_its_fields(fields: dict[str, Any], made: str) -> None:
    message = f"config id {fields['id']!r} does not name its fields (they make {made!r})"
    with pytest.raises(ValueError) as built:
        Config(**fields)
    assert str(built.value) == message
    # Decoded from JSON (a fact, plan.json) it is a validation error with the same sentence.
    with pytest.raises(msgspec.ValidationError) as decoded:
        msgspec.json.decode(msgspec.json.encode(fields), type=Config)
    assert str(decoded.value) == message


def test_a_config_refuses_unknown_fields_and_cannot_be_changed() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"stepz"):
        msgspec.convert({"id": "s2", "speculative": True, "steps": 2, "stepz": 3}, Config)
    s2 = make(2)
    with pytest.raises(AttributeError):
        s2.steps = 3  # type: ignore[misc]


def test_make_builds_the_configs_the_grid_names() -> None:
    assert make() == Config(id="baseline", speculative=False)
    assert make(algorithm="EAGLE3") == make()  # a baseline has no algorithm
    assert make(5, 4, 8, "EAGLE3", "fast") == Config(
        id="s5-k4-d8+fast", speculative=True, algorithm="EAGLE3", steps=5, topk=4, draft_tokens=8,
        env_profile="fast",
    )  # fmt: skip


def test_columns_and_the_point_derive_from_the_struct() -> None:
    columns, point, types = config.COLUMNS, config.POINT, config.COLUMN_TYPES
    fields = [f.name for f in msgspec.structs.fields(Config)]
    assert columns == tuple(f for f in fields if f != "id")
    assert columns == ("speculative", "algorithm", "steps", "topk", "draft_tokens", "overlap_schedule",
                       "adaptive", "env_profile")  # fmt: skip
    assert point == tuple(f for f in columns if f != "env_profile")
    assert types == {"speculative": bool, "algorithm": str, "steps": int, "topk": int, "draft_tokens": int,
                     "overlap_schedule": bool, "adaptive": bool, "env_profile": str}  # fmt: skip
    assert make(5, 4, 8, "EAGLE3", "fast").point == (True, "EAGLE3", 5, 4, 8, None, False)
    assert make(2, env_profile="fast").point == make(2).point


def test_grid_warnings_are_said_once_whatever_the_profiles() -> None:
    axes = {"steps": [1, 2], "topk": [1, 2], "draft_tokens": [3, 5]}
    one, warned = config.grid(axes, engines=("sglang",))
    two, warned_twice = config.grid(axes, env_profiles=["default", "fast"], engines=("sglang",))
    assert len(two) == 2 * len(one)
    assert warned_twice == warned and len(warned) == 4


def test_an_engine_outside_the_table_is_a_problem() -> None:
    assert config.engine_problems(make(2), "tgi") == [
        "specsweep_engine: 'tgi' is not one of: llama_cpp, sglang, vllm"
    ]
