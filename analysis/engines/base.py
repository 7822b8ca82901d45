"""The engine interface: what one engine module declares (`Engine`), and the setting readers its
argv uses.

Engines sit below analysis.sweep: they see a config through `Point` (the fields they render), never
the sweep's own modules. Settings are the engine role's variables (`<role>_<setting>`) under their
short names, resolved by the plan per host with the role's defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Settings = Mapping[str, Any]


class Point(Protocol):
    """What an engine reads of a sweep config (analysis.sweep.config.Config)."""

    @property
    def speculative(self) -> bool: ...
    @property
    def algorithm(self) -> str | None: ...
    @property
    def steps(self) -> int | None: ...
    @property
    def topk(self) -> int | None: ...
    @property
    def draft_tokens(self) -> int | None: ...
    @property
    def overlap_schedule(self) -> bool | None: ...
    @property
    def adaptive(self) -> bool: ...


class SettingError(ValueError):
    """A host setting that cannot be rendered; the message starts with '<variable>: '."""


# `-e adaptive_config=builtin`: the engine's own built-in schedule, no file.
BUILTIN_SCHEDULE = "builtin"


class ScheduleError(ValueError):
    """A schedule the engine would refuse; the message says why, as the engine's loader does."""


@dataclass(frozen=True)
class Adaptive:
    """An engine's per-batch-size step schedule, measured as one more config (`-e adaptive_config`).

    problems(settings, algorithm, topks): why the engine refuses the arm on a host, in its own words
    (`algorithm`: the sweep's, None for the host's own);
    schedule(settings, given, host): (why this host cannot follow `given`, the schedule it follows);
    start(schedule): the step count the server starts from (ScheduleError: it never speculates);
    notes(given, schedule, levels): what the operator should know of it."""

    label: str  # the engine as people say it: "SGLang"
    flag: str  # what turns it on, for a refusal on another engine
    problems: Callable[[Settings, str | None, Sequence[int]], list[str]]
    schedule: Callable[[Settings, str, str], tuple[str | None, dict[str, Any]]]
    start: Callable[[dict[str, Any]], int]
    notes: Callable[[str, dict[str, Any], Sequence[int]], list[str]]


@dataclass(frozen=True)
class Engine:
    """One engine, as the controller sees it. The host side (stdlib-only files) keys its own two
    tables by `name`: the benchmark's (roles/benchmark/files/specsweep_bench_engines.py ENGINES: the
    request and stream adapter, its counters, the server's facts and load gauges) and the modules'
    (plugins/module_utils/specsweep_engines.py ENGINES: readiness, failure patterns);
    tests/unit/test_engines.py checks those keys against ENGINES."""

    name: str
    role: str  # its preflight role; variables are `<role>_<setting>`, with the role's defaults
    settings: tuple[str, ...]  # the role variables the plan reads (short names)
    argv: Callable[[Point, Settings, int], list[str]]  # a config's launch argv; int: the client's slots
    base_env: Callable[[Settings], dict[str, Any]]  # every server's environment, before env profiles
    version: Callable[[Settings], str | None]  # the version the argv is spelt for; None: preflight says
    problems: Callable[[Point], list[str]]  # why it cannot run a config ("<variable>: <sentence>")
    algorithms: tuple[str, ...]  # the algorithms a grid point describes with its axes
    # Why the engine's own rules refuse a config with this host's settings: the plan refuses the sweep.
    refusals: Callable[[Point, Settings], list[str]] = lambda config, s: []
    axes: frozenset[str] = frozenset()  # the sweep axes it has besides steps (analysis.sweep.config.AXES)
    clients: tuple[str, ...] = ("specsweep",)  # benchmark clients that drive it (analysis.sweep.client)
    # How its preflight role has the host's own engine check the plan's entries: what the role's check
    # reads (filter specsweep_engine_check_input) and what it found -> {version, problems, ...}
    # (filter specsweep_engine_found).
    check_input: Callable[[Sequence[Mapping[str, Any]]], dict[str, Any]] | None = None
    found: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]] | None = None
    adaptive: Adaptive | None = None  # None: no per-batch-size schedule arm
    multinode: bool = False  # one server over several hosts (node ranks >= 1 follow rank 0)
    assumed_tps: float = 40.0  # a baseline's rate for the first estimate, before any sweep of it
    # A launch's load for the first estimate, before any sweep of it (None: up to the health timeout).
    assumed_load_s: float | None = None
    # The suite's own work around each launch (stop, record, launch) for the first estimate: a GPU
    # server's stop waits for its memory and port to come back.
    assumed_overhead_s: float = 20.0
    cpu_bound: bool = False  # its speed is the CPU share it gets (the estimate scales by the host's load)
    # The settings naming the checkpoint files or folders a launch reads (-e prefetch reads them ahead).
    checkpoints: tuple[str, ...] = ("model_path",)

    def server(self, s: Settings) -> dict[str, Any]:
        """Where the launched server listens and how long it may take to answer, for the host's tasks."""
        host, port = text(s, "host", required=True), port_of(s)
        timeout = number(s, "health_timeout_s", float, lambda x: x > 0, "a number > 0", required=True)
        return {
            "engine": self.name,
            "version": self.version(s),
            "model": text(s, "model_path", required=True),
            "host": host,
            "port": port,
            "url": f"http://{host}:{port}",
            "health_timeout_s": timeout,
            "api_key": s.get("api_key") or "",
            # The engine's own Python (SGLang's environment; None for llama.cpp): bench_serving runs there.
            "python": text(s, "python"),
        }


COMMON_SETTINGS = ("model_path", "host", "port", "env", "extra_args", "health_timeout_s")


# ---------------------------------------------------------------------------------------------
# Setting readers: each refuses what argparse or a shell-free argv would misread, naming the variable.
# ---------------------------------------------------------------------------------------------


def text(s: Settings, key: str, *, required: bool = False) -> str | None:
    """A string setting; refuses a leading '-' that argparse would read as a flag."""
    value = s.get(key)
    if value is None or value == "":
        if required:
            raise SettingError(f"{key}: is required.")
        return None
    if not isinstance(value, str):
        raise SettingError(f"{key}: must be a string, got {type(value).__name__}.")
    if value.startswith("-"):
        raise SettingError(f"{key}: must not start with '-' (argparse would read it as a flag).")
    if "\0" in value or "\n" in value:
        raise SettingError(f"{key}: must not contain a newline or NUL.")
    return value


def number(
    s: Settings,
    key: str,
    cast: Callable[[Any], Any],
    ok: Callable[[Any], bool],
    rule: str,
    *,
    required: bool = False,
) -> Any:
    """A numeric setting; inventory values may arrive as strings, so they are cast."""
    value = s.get(key)
    if value is None or value == "":
        if required:
            raise SettingError(f"{key}: is required.")
        return None
    if isinstance(value, bool):
        raise SettingError(f"{key}: must be {rule}, got {value!r}.")
    try:
        result = cast(value)
    except (TypeError, ValueError):
        raise SettingError(f"{key}: must be {rule}, got {value!r}.") from None
    if (cast is int and isinstance(value, float) and value != result) or not ok(result):
        raise SettingError(f"{key}: must be {rule}, got {value!r}.")
    return result


def flag(s: Settings, key: str) -> bool:
    """A true/false setting; a string "false" would be truthy, so a real YAML boolean is required."""
    value = s.get(key, False)
    if not isinstance(value, bool):
        raise SettingError(f"{key}: must be true or false, got {value!r}.")
    return value


def words(s: Settings, key: str) -> list[str]:
    """A list of argv words (numbers are taken as their text)."""
    value = s.get(key) or []
    if not isinstance(value, list) or not all(isinstance(w, str | int | float) for w in value):
        raise SettingError(f"{key}: must be a list of strings.")
    result = [str(w) for w in value]
    if any("\0" in w for w in result):
        raise SettingError(f"{key}: an item contains a NUL byte.")
    return result


def port_of(s: Settings) -> int:
    """The server's port."""
    return number(s, "port", int, lambda n: 0 < n < 65536, "a port number", required=True)


def user_env(s: Settings) -> dict[str, Any]:
    """The operator's env for every server (NCCL_*, ...), as given."""
    return dict(s.get("env") or {})
