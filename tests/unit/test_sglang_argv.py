"""SGLang's launch argv (analysis.engines.sglang.argv), checked against SGLang 0.5.23's flags,
and where the rules that used to live in the argv filter are enforced now (analysis.engines.sglang,
through analysis.sweep.config).

fixtures/sglang_0.5.23_flags.txt lists every `--flag` that `python -m sglang.launch_server`
accepts, with its kind (switch/int/float/str/list/other). It is generated from the sglang
wheel's source text by `sglang_flags_from_source` below (no sglang import):

    pip download --no-deps -d /tmp/w sglang==0.5.23
    cd /tmp/w && python -m zipfile -e sglang-0.5.23-*.whl .
    python tests/unit/test_sglang_argv.py /tmp/w/sglang > tests/unit/fixtures/sglang_0.5.23_flags.txt

The `sglang_src` fixture downloads that wheel (once, into .cache/) so the fixture and the
algorithm names are checked against the real source on every run.
"""

from __future__ import annotations

import ast
import itertools
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from sglang_wheel import sglang_source

from analysis.engines import ENGINES, SettingError, base, sglang, sglang_adaptive
from analysis.engines.sglang import argv as sglang_argv
from analysis.sweep import config, request
from analysis.sweep.config import Config, make

FLAGS_FIXTURE = Path(__file__).parent / "fixtures" / "sglang_0.5.23_flags.txt"
PY = "/opt/sglang/bin/python"


# --------------------------------------------------------------------------------------
# Flag list from SGLang's source text
# --------------------------------------------------------------------------------------
# 0.5.23 declares most flags as annotated fields of namespace classes
# (sglang/srt/arg_groups/fields/*.py) that arg_groups/arg_utils.py
# add_cli_args_from_dataclass turns into argparse options; ServerArgs.add_cli_args
# (srt/server_args.py) adds a few by hand. This mirrors that derivation on the AST.

_SCALARS = {"int": "int", "float": "float", "str": "str"}


def _name(node: ast.expr | None) -> str:
    """Dotted name of a Name/Attribute node ('' otherwise)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_name(node.value)}.{node.attr}"
    return ""


def _subscript(node: ast.expr) -> tuple[str, list[ast.expr]]:
    """('Optional', [args]) for Optional[...]; ('', []) for anything else."""
    if isinstance(node, ast.Subscript):
        inner = node.slice
        args = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        return _name(node.value).rsplit(".", 1)[-1], args
    return "", []


def _unwrap_optional(node: ast.expr) -> ast.expr:
    """X for Optional[X], Union[X, None] or X | None (like arg_utils._unwrap_optional)."""
    head, args = _subscript(node)
    if head == "Optional":
        return args[0]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        args, head = [node.left, node.right], "Union"
    if head == "Union":
        rest = [a for a in args if not (isinstance(a, ast.Constant) and a.value is None)]
        if len(rest) == 1:
            return rest[0]
    return node


def _action_kind(action: ast.expr, nargs: Any, kwargs: dict[str, Any]) -> str:
    """Kind of an option with an explicit action."""
    if isinstance(action, ast.Constant):
        return "switch" if action.value in ("store_true", "store_false") else "other"
    if "nargs" in kwargs:
        if nargs in ("*", "+"):
            return "list"
        return _SCALARS.get(_name(kwargs.get("type")), "str" if "type" not in kwargs else "other")
    # BooleanOptionalAction and the Deprecated*Action classes take no value by default.
    return "switch"


def _field_kind(annotation: ast.expr, meta: dict[str, Any]) -> str:
    """Kind of an A[T, ...] field, following add_cli_args_from_dataclass."""
    if "action" in meta:
        action_kwargs = meta.get("action_kwargs") or {}
        return _action_kind(meta["action"], action_kwargs.get("nargs"), action_kwargs)
    parser = _name(meta.get("type_parser"))
    inner = _unwrap_optional(annotation)
    head, args = _subscript(inner)
    if head == "Literal":
        first = args[0].value if isinstance(args[0], ast.Constant) else ""
        literal = type(first).__name__ if not isinstance(first, bool) else "str"
        return _SCALARS.get(parser, "other") if parser else _SCALARS.get(literal, "str")
    if head in ("List", "list") and not parser:
        return "list"
    if _name(inner) == "bool":
        return "switch"
    if meta.get("nargs") in ("*", "+"):
        return "list"
    if parser:
        return _SCALARS.get(parser, "other")
    return _SCALARS.get(_name(inner), "str")


def _literal(node: ast.expr) -> Any:
    """Python value of a literal keyword, else the node itself (actions, parsers)."""
    if isinstance(node, ast.Dict):  # action_kwargs={"type": str, "nargs": "*"}
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values, strict=True) if k}
    try:
        return ast.literal_eval(node)
    except ValueError:
        return node


def _field_options(node: ast.AnnAssign) -> dict[str, str]:
    """{option: kind} for one namespace field ({} when it has no CLI surface)."""
    head, args = _subscript(node.annotation)
    if head not in ("A", "Annotated") or not isinstance(node.target, ast.Name):
        return {}
    meta: dict[str, Any] | None = None
    for extra in args[1:]:  # the first Arg(...) or help string wins, as in _unwrap_annotated
        if isinstance(extra, ast.Call) and _name(extra.func).endswith("Arg"):
            meta = {kw.arg: _literal(kw.value) for kw in extra.keywords if kw.arg}
            break
        if isinstance(extra, (ast.Constant, ast.JoinedStr, ast.BinOp)):
            meta = {}
            break
    if meta is None or meta.get("no_cli") is True:
        return {}
    main = meta.get("cli_name") or "--" + node.target.id.replace("_", "-")
    names = [main, *(meta.get("aliases") or [])]
    kind = _field_kind(args[0], meta)
    options = dict.fromkeys(names, kind)
    if _name(meta.get("action")).endswith("BooleanOptionalAction"):
        options.update({"--no-" + n[2:]: "switch" for n in names if n.startswith("--")})
    return options


def _manual_options(tree: ast.Module) -> dict[str, str]:
    """{option: kind} of the parser.add_argument("--...") calls in server_args.py."""
    options: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func).endswith(".add_argument")):
            continue
        kwargs = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        nargs = _literal(kwargs["nargs"]) if "nargs" in kwargs else None
        if "action" in kwargs:
            kind = _action_kind(kwargs["action"], nargs, kwargs)
        elif nargs in ("*", "+"):
            kind = "list"
        else:
            kind = _SCALARS.get(_name(kwargs.get("type")), "str" if "type" not in kwargs else "other")
        for arg in node.args:
            if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                options[arg.value] = kind
    return options


def sglang_flags_from_source(package_dir: Path) -> dict[str, str]:
    """{option: kind} of `python -m sglang.launch_server` from an unpacked sglang package."""
    server_args = package_dir / "srt" / "server_args.py"
    tree = ast.parse(server_args.read_text())
    modules: dict[str, str] = {}  # class name -> module it is imported from
    namespaces: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.update({alias.asname or alias.name: node.module for alias in node.names})
        if isinstance(node, ast.Assign) and any(_name(t) == "_INPUT_NAMESPACES" for t in node.targets):
            assert isinstance(node.value, ast.List)
            namespaces = [_name(elt) for elt in node.value.elts]
    assert namespaces, "server_args.py no longer has _INPUT_NAMESPACES: update this parser"
    options = {"--help": "switch"}  # argparse's own
    parsed: dict[str, ast.Module] = {}
    for cls_name in namespaces:
        module = modules[cls_name]
        if module not in parsed:
            path = package_dir.parent / (module.replace(".", "/") + ".py")
            parsed[module] = ast.parse(path.read_text())
        (cls,) = [n for n in parsed[module].body if isinstance(n, ast.ClassDef) and n.name == cls_name]
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign):
                options.update(_field_options(stmt))
    options.update(_manual_options(tree))
    return dict(sorted(options.items()))


def load_flags(path: Path = FLAGS_FIXTURE) -> dict[str, str]:
    """{option: kind} from the committed fixture ('#' lines are comments)."""
    flags = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            flag, kind = line.split()
            flags[flag] = kind
    return flags


@pytest.fixture(scope="session")
def sglang_src() -> Path:
    """The sglang 0.5.23 package source, unpacked from its PyPI wheel (no install, no import)."""
    return sglang_source("sglang/srt/")


def test_fixture_matches_sglang_source(sglang_src: Path) -> None:
    assert load_flags() == sglang_flags_from_source(sglang_src)


def assert_sglang_accepts(argv: list[str]) -> None:
    """Every --flag in argv exists in 0.5.23 under that exact spelling (no argparse
    abbreviation), switches are not followed by a value and valued flags get one that
    their type parses."""
    flags = load_flags()
    assert all(isinstance(item, str) for item in argv)
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    rest = argv[3:]
    i = 0
    while i < len(rest):
        flag = rest[i]
        assert flag in flags, f"{flag} is not an SGLang 0.5.23 flag"
        kind = flags[flag]
        if kind == "switch":
            i += 1
            continue
        assert i + 1 < len(rest), f"{flag} needs a value"
        value = rest[i + 1]
        assert not value.startswith("--"), f"{flag} got no value"
        if kind in ("int", "float"):
            {"int": int, "float": float}[kind](value)
        # A list (nargs) takes every word up to the next flag.
        more = itertools.takewhile(lambda w: not w.startswith("--"), rest[i + 2 :])
        i += 2 + (len(list(more)) if kind == "list" else 0)


# --------------------------------------------------------------------------------------
# argv
# --------------------------------------------------------------------------------------

BASELINE = make()


def server(**kw: Any) -> dict[str, Any]:
    """Role settings for the seed case's 8-GPU host (sglang_server_* by short name)."""
    return {
        "python": PY,
        "model_path": "/models/Kimi-K2.5-int4",
        "draft_model_path": "/models/Kimi-K2.5-eagle3",
        "tp_size": 8,
        "host": "127.0.0.1",
        "port": 30000,
        "enable_metrics": False,
        "extra_args": [],
    } | kw


HEAD = [
    PY,
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/models/Kimi-K2.5-int4",
    "--tp-size",
    "8",
    "--host",
    "127.0.0.1",
    "--port",
    "30000",
]
DRAFT = ["--speculative-draft-model-path", "/models/Kimi-K2.5-eagle3"]


def render(conf: Config, srv: dict[str, Any], slots: int = 1) -> list[str]:
    """sglang_argv, plus the check that SGLang 0.5.23 would parse the result."""
    argv = sglang_argv(conf, srv, slots)
    assert_sglang_accepts(argv)
    return argv


def test_baseline_ignores_the_draft_model() -> None:
    assert render(BASELINE, server()) == HEAD


def test_the_client_concurrency_does_not_change_the_argv() -> None:
    """SGLang sizes its batches at run time: the plan's slots leave its argv alone."""
    conf = make(2, algorithm="EAGLE3")
    assert render(conf, server(), slots=8) == render(conf, server(), slots=1)


def test_eagle3_two_steps_chain() -> None:
    argv = render(make(2, topk=1, algorithm="EAGLE3"), server())
    assert argv == [
        *HEAD,
        "--speculative-algorithm",
        "EAGLE3",
        *DRAFT,
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "3",
    ]


def test_steps_alone_default_to_topk_1_and_steps_plus_1() -> None:
    only_steps = render(make(2, algorithm="EAGLE3"), server())
    assert only_steps == render(make(2, 1, 3, algorithm="EAGLE3"), server())
    assert only_steps[-6:] == ["--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
                               "--speculative-num-draft-tokens", "3"]  # fmt: skip


def test_the_overlap_scheduler_axis_turns_it_off_or_leaves_sglangs_choice() -> None:
    off = render(make(2, 1, 3, "EAGLE3", overlap_schedule=False), server())
    assert off[-1] == "--disable-overlap-schedule" and off.count("--disable-overlap-schedule") == 1
    on = render(make(2, 1, 3, "EAGLE3", overlap_schedule=True), server())
    assert on == render(make(2, 1, 3, "EAGLE3"), server())  # on is SGLang's own default
    assert "--disable-overlap-schedule" not in on


def test_eagle3_tree() -> None:
    assert render(make(5, 4, 8, algorithm="EAGLE3"), server()) == [
        *HEAD,
        "--speculative-algorithm",
        "EAGLE3",
        *DRAFT,
        "--speculative-num-steps",
        "5",
        "--speculative-eagle-topk",
        "4",
        "--speculative-num-draft-tokens",
        "8",
    ]


def test_ngram_has_no_topk_and_no_draft_model() -> None:
    argv = render(make(4, algorithm="NGRAM"), server(draft_model_path=None))
    assert argv == [
        *HEAD,
        "--speculative-algorithm",
        "NGRAM",
        "--speculative-num-steps",
        "4",
        "--speculative-num-draft-tokens",
        "5",
    ]


def test_ngram_leaves_out_a_group_draft_model() -> None:
    """One host can sweep NGRAM beside EAGLE3: the group's draft model is not passed to NGRAM."""
    with_draft = render(make(4, algorithm="NGRAM"), server())
    assert with_draft == render(make(4, algorithm="NGRAM"), server(draft_model_path=None))


def test_config_without_algorithm_takes_the_hosts_default() -> None:
    srv = server(speculative_algorithm="NEXTN", draft_model_path=None)
    argv = render(make(2), srv)
    assert argv[argv.index("--speculative-algorithm") + 1] == "NEXTN"
    # The config's own algorithm wins over the host's.
    argv = render(make(2, algorithm="EAGLE3"), server(speculative_algorithm="NEXTN"))
    assert argv[argv.index("--speculative-algorithm") + 1] == "EAGLE3"


def test_standalone() -> None:
    srv = server(draft_model_path="/models/small-llm")
    assert render(make(3, algorithm="STANDALONE"), srv) == [
        *HEAD,
        "--speculative-algorithm",
        "STANDALONE",
        "--speculative-draft-model-path",
        "/models/small-llm",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ]


def test_nextn_without_draft_model_uses_the_targets_mtp_layers() -> None:
    # The host's default may be spelled in lower case: SGLang's upper-cased name is rendered.
    srv = server(model_path="/models/DeepSeek-V3", draft_model_path=None, speculative_algorithm="nextn")
    argv = render(make(1), srv)
    assert argv == [
        *HEAD[:4],
        "/models/DeepSeek-V3",
        *HEAD[5:],
        "--speculative-algorithm",
        "NEXTN",
        "--speculative-num-steps",
        "1",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "2",
    ]
    assert render(make(1, algorithm="NEXTN"), srv) == argv


def test_optional_settings_multi_node_api_key_and_extra_args() -> None:
    srv = server(
        host="0.0.0.0",  # multi-node ranks must reach each other
        mem_fraction_static=0.85,
        attention_backend="fa3",
        cuda_graph_max_bs_decode="16",  # inventory strings are accepted
        enable_metrics=True,
        api_key="s3cret value",
        nnodes=2,
        node_rank=1,
        dist_init_addr="203.0.113.10:25000",
        extra_args=["--max-running-requests", "8", "--trust-remote-code"],
    )
    argv = render(make(2, algorithm="EAGLE3"), srv)
    assert argv == [
        *HEAD[:8],
        "0.0.0.0",
        *HEAD[9:],
        "--speculative-algorithm",
        "EAGLE3",
        *DRAFT,
        "--speculative-num-steps",
        "2",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "3",
        "--mem-fraction-static",
        "0.85",
        "--attention-backend",
        "fa3",
        "--cuda-graph-max-bs-decode",
        "16",
        "--enable-metrics",
        "--api-key",
        "s3cret value",  # one argv item, spaces and all: never shell-joined
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--dist-init-addr",
        "203.0.113.10:25000",
        "--max-running-requests",
        "8",
        "--trust-remote-code",
    ]


def test_metrics_for_all_schedulers_is_refused_naming_why() -> None:
    # Every rank's scheduler would export the same requests and the server-load probe sums them.
    srv = server(extra_args=["--trust-remote-code", "--enable-metrics-for-all-schedulers"])
    with pytest.raises(
        SettingError, match=r"^extra_args: --enable-metrics-for-all-schedulers .* tp_size times"
    ):
        render(make(1, algorithm="EAGLE3"), srv)
    assert "--trust-remote-code" in render(
        make(1, algorithm="EAGLE3"), server(extra_args=["--trust-remote-code"])
    )


# --------------------------------------------------------------------------------------
# Invalid combinations, each refused where it is now checked, naming the variable
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conf", "srv", "var"),
    [
        (make(2, algorithm="EAGLE"), server(draft_model_path=None), "draft_model_path"),
        (make(2, algorithm="EAGLE3"), server(draft_model_path=""), "draft_model_path"),
        (make(2, algorithm="STANDALONE"), server(draft_model_path=None), "draft_model_path"),
        # A config without an algorithm needs the host's sglang_server_speculative_algorithm.
        (make(2), server(), "speculative_algorithm"),
        (make(2), server(speculative_algorithm="MEDUSA"), "speculative_algorithm"),
        (make(2), server(speculative_algorithm="DFLASH"), "speculative_algorithm"),
        (BASELINE, server(model_path=None), "model_path"),
        (BASELINE, server(model_path="--trust-remote-code"), "model_path"),
        (BASELINE, server(python=None), "python"),
        (BASELINE, server(tp_size=0), "tp_size"),
        (BASELINE, server(tp_size="eight"), "tp_size"),
        (BASELINE, server(port=70000), "port"),
        (BASELINE, server(mem_fraction_static=1.5), "mem_fraction_static"),
        (BASELINE, server(enable_metrics="false"), "enable_metrics"),
        (BASELINE, server(nnodes=2, dist_init_addr="203.0.113.10:25000"), "node_rank"),
        (BASELINE, server(nnodes=2, node_rank=0), "dist_init_addr"),
        (BASELINE, server(nnodes=2, node_rank=2, dist_init_addr="h:1"), "node_rank"),
        (BASELINE, server(node_rank=1), "nnodes"),
        (BASELINE, server(extra_args="--foo bar"), "extra_args"),
    ],
)
def test_invalid_host_settings_name_the_variable(conf: Config, srv: dict[str, Any], var: str) -> None:
    with pytest.raises(SettingError, match=rf"^{var}: "):
        sglang_argv(conf, srv, 1)


def convert(**fields: Any) -> Config:
    """msgspec.convert of a config whose id is the one its fields make, so only a rule can refuse it."""
    spec = fields.get("speculative")
    made = config.config_id(fields.get("steps"), fields.get("topk"), fields.get("draft_tokens"),
                            speculative=spec if isinstance(spec, bool) else None)  # fmt: skip
    return msgspec.convert({"id": made, **fields}, Config)


@pytest.mark.parametrize(
    ("fields", "var"),
    [
        # Types: msgspec names the field.
        ({"speculative": True, "algorithm": "EAGLE3", "steps": True}, "steps"),
        ({"speculative": True, "algorithm": "EAGLE3", "steps": "3"}, "steps"),
        ({"speculative": "yes"}, "speculative"),
        # A speculative config needs its step count, a baseline has no speculative fields.
        ({"speculative": True, "algorithm": "EAGLE3", "topk": 2, "draft_tokens": 3}, "steps"),
        ({"speculative": True, "algorithm": "EAGLE3"}, "steps"),
        ({"speculative": False, "steps": 2}, "steps"),
        ({"speculative": False, "algorithm": "EAGLE3", "steps": 2}, "algorithm"),
        ({"speculative": False, "adaptive": True}, "adaptive"),
    ],
)
def test_an_invalid_config_is_refused_when_it_is_built(fields: dict[str, Any], var: str) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        convert(**fields)
    message = str(caught.value)
    assert message.startswith(f"{var}: ") or f"`$.{var}`" in message, message


@pytest.mark.parametrize(
    ("steps", "topk", "draft_tokens", "shape_rule"),
    [
        (2, 2, 6, True),  # more than the tree holds
        (2, 1, 4, True),  # a chain drafts steps + 1
        (2, None, 2, True),  # draft tokens without topk
        (1, 2, 1, True),  # not even the root plus one token
        (2, 2, None, False),  # a tree needs its draft count: the grid asks for it
    ],
)
def test_an_invalid_shape_names_draft_tokens(
    steps: int, topk: int | None, draft_tokens: int | None, shape_rule: bool
) -> None:
    problems = config.shape_problems(steps, topk, draft_tokens)
    if shape_rule:
        assert len(problems) == 1 and problems[0].startswith("draft_tokens: "), problems
    else:
        assert problems == []
    with pytest.raises(config.GridError, match=r"^draft_tokens: "):
        config.grid(
            {
                "steps": [steps],
                "topk": [topk] if topk else [],
                "draft_tokens": [draft_tokens] if draft_tokens else [],
            },
            engines=("sglang",),
        )


@pytest.mark.parametrize(
    ("conf", "var"),
    [
        (make(2, algorithm="MEDUSA"), "algorithm"),
        (make(2, algorithm="eagle3"), "algorithm"),  # facts and tables compare the exact spelling
        (make(1, algorithm="DFLASH"), "algorithm"),
        (make(2, 4, 6, algorithm="NGRAM"), "topk"),
    ],
)
def test_what_sglang_cannot_run_names_the_variable(conf: Config, var: str) -> None:
    problems = config.engine_problems(conf, "sglang")
    assert len(problems) == 1 and problems[0].startswith(f"{var}: "), problems
    topk, draft_tokens = [conf.topk] if conf.topk else [], [conf.draft_tokens] if conf.draft_tokens else []
    with pytest.raises(config.GridError, match=rf"^{var}: "):
        config.grid(
            {"steps": [conf.steps], "topk": topk, "draft_tokens": draft_tokens},
            algorithm=conf.algorithm,
            engines=("sglang",),
        )


@pytest.mark.parametrize(("name", "value"), [("steps", 0), ("steps", -1), ("topk", 0), ("draft_tokens", 0)])
def test_counts_below_one_are_refused_by_the_request(name: str, value: int) -> None:
    errors = request.read({"steps": 2, name: value}).errors
    assert errors == [f"{name}: {value} is below the minimum of 1"]


def test_every_problem_of_a_request_is_listed() -> None:
    errors = request.read({"steps": 0, "topk": -1}).errors
    assert [m.split(":")[0] for m in errors] == ["steps", "topk"]
    assert config.shape_problems(5, 4, 21) == []
    assert config.engine_problems(make(5, 4, 21, algorithm="EAGLE3"), "sglang") == []
    assert config.engine_problems(BASELINE, "sglang") == []


def test_sweepable_algorithms_are_sglang_algorithms() -> None:
    assert set(sglang.ALGORITHMS) <= sglang.KNOWN_ALGORITHMS
    assert "NONE" not in sglang.KNOWN_ALGORITHMS  # an enum member, but it means "off"
    assert sglang.DRAFT_REQUIRED | set(sglang_adaptive.ALGORITHMS) <= set(sglang.ALGORITHMS)


def test_abbreviations_are_not_flags() -> None:
    """argparse accepts unique prefixes (--tp) and exits 2 on ambiguous ones
    (--cuda-graph-max-bs); exact spellings in the fixture keep both out of our argv."""
    flags = load_flags()
    assert "--tp" not in flags
    assert "--cuda-graph-max-bs" not in flags
    assert len([f for f in flags if f.startswith("--cuda-graph-max-bs")]) > 1


def test_algorithm_names_match_sglang_source(sglang_src: Path) -> None:
    """sglang.KNOWN_ALGORITHMS is what SpeculativeAlgorithm.from_string accepts: the enum
    members but NONE, plus the reserved aliases (NEXTN)."""
    speculative = sglang_src / "srt" / "speculative"
    names: set[str] = set()
    for node in ast.parse((speculative / "spec_info.py").read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == "SpeculativeAlgorithm":
            names |= {
                t.id
                for stmt in node.body
                if isinstance(stmt, ast.Assign)
                for t in stmt.targets
                if isinstance(t, ast.Name)
            }
    for node in ast.parse((speculative / "spec_registry.py").read_text()).body:
        if isinstance(node, ast.Assign) and _name(node.targets[0]) == "_RESERVED_ALIASES":
            assert isinstance(node.value, ast.Call)
            names |= ast.literal_eval(node.value.args[0])
    assert names - {"NONE"} == sglang.KNOWN_ALGORITHMS


# --------------------------------------------------------------------------------------
# env
# --------------------------------------------------------------------------------------


def test_env_merges_profile_over_base_and_stringifies() -> None:
    base = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "SGLANG_RECORD_STEP_TIME": True}
    profile = {
        "NCCL_ALGO": None,
        "NCCL_P2P_LEVEL": "SYS",
        "SGLANG_HEALTH_CHECK_TIMEOUT": 60,
    }
    assert config.merge_env(base, profile) == {
        "NCCL_PROTO": "LL",
        "SGLANG_RECORD_STEP_TIME": "1",
        "NCCL_P2P_LEVEL": "SYS",
        "SGLANG_HEALTH_CHECK_TIMEOUT": "60",
    }
    assert config.merge_env({}, None) == {}
    assert config.merge_env(None, {"A": 1.5}) == {"A": "1.5"}
    assert config.merge_env({"A": False}) == {"A": "0"}


@pytest.mark.parametrize(
    ("base", "profile", "key"),
    [
        ({"1BAD": "x"}, None, "'1BAD'"),
        ({"NCCL-ALGO": "x"}, None, "'NCCL-ALGO'"),
        ({"OK": "x"}, {"TRAIL\n": "x"}, "'TRAIL\\\\n'"),
        ({"NCCL_ALGO": "Ring\nEVIL=1"}, None, "NCCL_ALGO"),
        ({"NCCL_ALGO": "Ri\0ng"}, None, "NCCL_ALGO"),
        ({"NCCL_ALGO": None}, None, "NCCL_ALGO"),
        ({"NCCL_ALGO": ["Ring"]}, None, "NCCL_ALGO"),
        ("NCCL_ALGO=Ring", None, "env"),
        ({"OK": "x"}, ["NCCL_ALGO"], "env profile"),
    ],
)
def test_env_rejects_bad_keys_and_values(base: Any, profile: Any, key: str) -> None:
    with pytest.raises(ValueError, match=rf"^{key}: ") as info:
        config.merge_env(base, profile)
    assert "\n" not in str(info.value)


def test_the_engine_table_renders_sglang_with_these_functions() -> None:
    engine = ENGINES["sglang"]
    assert (engine.name, engine.role, engine.argv, engine.base_env) == (
        "sglang", "sglang_server", sglang_argv, base.user_env,
    )  # fmt: skip
    assert engine.base_env({"env": {"NCCL_ALGO": "Ring"}}) == {"NCCL_ALGO": "Ring"}
    assert engine.base_env({}) == {}
    assert engine.version(server()) is None  # the host reports it in preflight
    assert engine.server(server(api_key="k", health_timeout_s=1800)) == {
        "engine": "sglang",
        "version": None,
        "model": "/models/Kimi-K2.5-int4",
        "host": "127.0.0.1",
        "port": 30000,
        "url": "http://127.0.0.1:30000",
        "health_timeout_s": 1800.0,
        "api_key": "k",
        "python": "/opt/sglang/bin/python",  # bench_serving runs there (benchmark_sglang_python)
    }
    with pytest.raises(SettingError, match=r"^health_timeout_s: "):
        engine.server(server())


if __name__ == "__main__":
    # Regenerate the fixture: python tests/unit/test_sglang_argv.py /path/to/unpacked/sglang
    flags = sglang_flags_from_source(Path(sys.argv[1]))
    print("# Options of `python -m sglang.launch_server` in sglang 0.5.23 and their kind")
    print("# (switch: takes no value). Generated from the wheel's source by")
    print("# tests/unit/test_sglang_argv.py; do not edit by hand. It matched, flag for flag")
    print("# and kind for kind, the parser ServerArgs.add_cli_args builds at run time.")
    for flag, kind in flags.items():
        print(f"{flag} {kind}")
