"""The result-fact schema: one JSON document per (sweep, host, config).

The controller-side writer (`python -m analysis record`) and every reader
(`analysis.facts.load`) go through these dataclasses, so the JSON on disk is their
serialisation and nothing else. Bump SCHEMA_VERSION on any incompatible change
and teach `migrate()` the step from the previous version.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

SCHEMA_VERSION = 1

Status = Literal["ok", "failed", "skipped"]
EngineName = Literal["llama_cpp", "sglang"]

# Env/argv values whose name matches this are secrets: never written to disk.
SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL)", re.IGNORECASE)
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key"})
REDACTED = "<redacted>"


class SchemaError(ValueError):
    """A document does not match the fact schema."""


@dataclass(frozen=True)
class Config:
    """One point of the sweep grid; `id` names its result file."""

    id: str
    speculative: bool
    algorithm: str | None = None
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None
    env_profile: str = "default"


@dataclass(frozen=True)
class Gpu:
    """One GPU as `nvidia-smi` reports it."""

    index: int
    name: str
    memory_total_mib: int | None = None
    uuid: str | None = None


@dataclass(frozen=True)
class HostFacts:
    """What the host was, so numbers from different hosts can be told apart."""

    hostname: str
    cpu_model: str | None = None
    cpu_count: int | None = None
    mem_total_mib: int | None = None
    kernel: str | None = None
    python: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    gpu_driver: str | None = None
    cuda_version: str | None = None
    gpu_topology: str | None = None


@dataclass(frozen=True)
class Engine:
    """The inference engine that served this config."""

    name: EngineName
    model: str
    launcher: str
    version: str | None = None


@dataclass(frozen=True)
class Launch:
    """Exactly what was started (secrets redacted)."""

    argv: list[str]
    env: dict[str, str]
    log_path: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class SpecStats:
    """Speculative-decoding counters scoped to one run (never since boot)."""

    drafted: int | None = None
    accepted: int | None = None
    verify_steps: int | None = None
    accept_length: float | None = None
    accept_rate: float | None = None


@dataclass(frozen=True)
class RequestResult:
    """One streamed request as the on-host client measured it."""

    prompt_id: str
    output_tokens: int
    ttft_s: float
    e2e_s: float
    decode_tps: float | None
    itl_s: list[float] = field(default_factory=list)
    text: str = ""
    error: str | None = None


@dataclass(frozen=True)
class Run:
    """One repeat of the prompt set at one concurrency."""

    repeat: int
    concurrency: int
    duration_s: float
    requests: list[RequestResult]
    spec: SpecStats = field(default_factory=SpecStats)


@dataclass(frozen=True)
class BenchmarkSettings:
    """How the runs were produced, so two facts can be checked comparable."""

    client: str
    prompt_set: str
    prompt_sha256: str
    max_tokens: int
    warmup: int
    repeats: int
    concurrency: list[int]


@dataclass(frozen=True)
class Timings:
    """Wall-clock phases of this config, seconds; epoch seconds for *_at."""

    started_at: float
    finished_at: float
    ready_at: float | None = None
    load_s: float | None = None
    bench_s: float | None = None


@dataclass(frozen=True)
class Failure:
    """Why a config produced no numbers: data, not a missing file."""

    phase: str
    cause: str
    message: str
    log_tail: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Suite:
    """Provenance of the measuring code itself."""

    git_rev: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class Fact:
    """Everything known about one (sweep, host, config)."""

    sweep_id: str
    host: str
    config: Config
    engine: Engine
    launch: Launch
    host_facts: HostFacts
    timings: Timings
    status: Status
    benchmark: BenchmarkSettings | None = None
    runs: list[Run] = field(default_factory=list)
    failure: Failure | None = None
    server_info: dict[str, Any] = field(default_factory=dict)
    suite: Suite = field(default_factory=Suite)
    schema_version: int = SCHEMA_VERSION


T = TypeVar("T")
Convert = Callable[[Any, str], Any]  # (JSON value, where it is) -> the typed value, or SchemaError


@functools.cache
def _converter(tp: Any) -> Convert:
    """The function that converts a JSON value to `tp`, raising SchemaError naming the field.

    Made once per type from its annotations: a report reads thousands of facts, and working out
    what each annotation means again for every value cost more than reading the JSON.
    """
    origin = get_origin(tp)
    if tp is Any:
        return lambda value, where: value
    if origin in (typing.Union, types.UnionType):
        return _union(get_args(tp))
    if origin is Literal:
        return _literal(get_args(tp))
    if origin is list:
        return _list(get_args(tp)[0])
    if origin is dict:
        return _dict(get_args(tp)[1])
    if dataclasses.is_dataclass(tp):
        return functools.partial(from_dict, tp)
    if tp is float:
        return _float
    if tp is int:
        return _int
    if tp in (str, bool):
        return functools.partial(_exact, tp)

    def unsupported(value: Any, where: str) -> Any:
        raise SchemaError(f"{where}: unsupported type {tp!r}")

    return unsupported


def _union(options: tuple[Any, ...]) -> Convert:
    """`A | B | None`: null where allowed, else the first option that takes the value."""
    nullable = type(None) in options
    converters = [_converter(o) for o in options if o is not type(None)]

    def convert(value: Any, where: str) -> Any:
        if value is None:
            if nullable:
                return None
            raise SchemaError(f"{where}: must not be null")
        errors = []
        for option in converters:
            try:
                return option(value, where)
            except SchemaError as exc:
                errors.append(str(exc))
        raise SchemaError("; ".join(errors))

    return convert


def _literal(allowed: tuple[Any, ...]) -> Convert:
    """One of the listed values."""

    def convert(value: Any, where: str) -> Any:
        if value not in allowed:
            raise SchemaError(f"{where}: {value!r} is not one of {list(allowed)}")
        return value

    return convert


def _list(item_tp: Any) -> Convert:
    """A list, each item converted."""
    item = _converter(item_tp)
    floats = item_tp is float

    def convert(value: Any, where: str) -> Any:
        if not isinstance(value, list):
            raise SchemaError(f"{where}: expected a list, got {type(value).__name__}")
        if floats and set(map(type, value)) <= {float}:
            return value  # hot path (inter-token gaps): already exactly what the slow path builds
        return [item(v, f"{where}[{i}]") for i, v in enumerate(value)]

    return convert


def _dict(value_tp: Any) -> Convert:
    """An object with string keys, each value converted."""
    item = _converter(value_tp)

    def convert(value: Any, where: str) -> Any:
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: expected an object, got {type(value).__name__}")
        return {str(k): item(v, f"{where}.{k}") for k, v in value.items()}

    return convert


def _float(value: Any, where: str) -> float:
    """A number (an integer is taken as a float; a boolean is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(f"{where}: expected a number, got {value!r}")
    return float(value)


def _int(value: Any, where: str) -> int:
    """An integer (a boolean is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SchemaError(f"{where}: expected an integer, got {value!r}")
    return value


def _exact(tp: type, value: Any, where: str) -> Any:
    """A string or a boolean, as is."""
    if not isinstance(value, tp):
        raise SchemaError(f"{where}: expected {tp.__name__}, got {value!r}")
    return value


@functools.cache
def _unchanged(tp: Any) -> frozenset[type]:
    """The JSON value types that `_converter(tp)` returns as they are, so a caller may skip it.

    Exact types: a bool is not an int, and an int given for a float is converted. A fact has a
    few hundred such fields, and calling a converter for each cost as much as parsing the JSON.
    """
    if tp in (float, int, str, bool):
        return frozenset({tp})
    if get_origin(tp) in (typing.Union, types.UnionType):
        options = [o for o in get_args(tp) if o is not type(None)]
        if len(options) == 1:  # `X | None` (several options: the first that takes a value wins)
            return _unchanged(options[0]) | {type(None)}
    return frozenset()


Field = tuple[str, Convert, bool, frozenset[type]]  # name, converter, required, values kept as is


@functools.cache
def _fields(cls: type) -> tuple[frozenset[str], tuple[Field, ...]]:
    """A dataclass's field names and how to convert each, resolved once per class."""
    hints = get_type_hints(cls)
    fields = tuple(
        (
            f.name,
            _converter(hints[f.name]),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
            _unchanged(hints[f.name]),
        )
        for f in dataclasses.fields(cls)
    )
    return frozenset(f[0] for f in fields), fields


def from_dict(cls: type[T], data: Any, where: str = "$") -> T:
    """Build dataclass `cls` from parsed JSON; unknown or missing keys are errors."""
    if not isinstance(data, dict):
        raise SchemaError(f"{where}: expected an object, got {type(data).__name__}")
    names, fields = _fields(cls)
    if not names.issuperset(data):
        raise SchemaError(f"{where}: unknown field(s) {', '.join(sorted(set(data) - names))}")
    kwargs = {}
    for name, convert, required, unchanged in fields:
        if name in data:
            value = data[name]
            kwargs[name] = value if type(value) in unchanged else convert(value, f"{where}.{name}")
        elif required:
            raise SchemaError(f"{where}: missing field {name}")
    if len(kwargs) < len(fields):
        return cls(**kwargs)  # the defaults of the fields not given
    # Every field given (the writer writes them all): what the generated __init__ does, less a
    # frozen dataclass's object.__setattr__ per field (a fifth of the time a fact took to check).
    made = cls.__new__(cls)
    made.__dict__.update(kwargs)
    return made


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring an older fact document to SCHEMA_VERSION, or refuse it clearly."""
    version = data.get("schema_version")
    if version == SCHEMA_VERSION:
        return data
    raise SchemaError(f"schema_version {version!r} is not supported (this analysis reads {SCHEMA_VERSION})")


def load_fact(data: Any) -> Fact:
    """Parse one fact document as read from disk."""
    if not isinstance(data, dict):
        raise SchemaError("$: expected an object")
    return from_dict(Fact, migrate(data))


def to_dict(fact: Fact) -> dict[str, Any]:
    """Serialise a fact for writing; the inverse of load_fact."""
    return dataclasses.asdict(fact)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Environment with secret-looking values replaced."""
    return {k: (REDACTED if SECRET_NAME.search(k) else v) for k, v in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    """argv with the value after a secret flag (or inside --flag=value) replaced."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        flag = arg.split("=", 1)[0]
        if hide_next:
            out.append(REDACTED)
        elif flag in SECRET_FLAGS and "=" in arg:
            out.append(f"{flag}={REDACTED}")
        else:
            out.append(arg)
        hide_next = arg in SECRET_FLAGS
    return out
