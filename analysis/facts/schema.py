"""The result-fact schema: one JSON document per (sweep, host, config).

The writer (analysis.facts.record, which the specsweep_results action calls) and every reader
(analysis.facts.load, the search) go through these msgspec structs, so the JSON on disk is their
serialisation and nothing else; the config is the sweep's own (analysis.sweep.config.Config).
Every struct refuses unknown and missing fields, takes no bool for a number, and takes an integer
for a float. Bump SCHEMA_VERSION on an incompatible change and teach `migrate()` the step from
the previous version; a new field with a default is compatible (older facts load as they are).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import msgspec

from analysis.engines import NAMES
from analysis.sweep.config import Config
from analysis.sweep.launchprior import LaunchPrior

SCHEMA_VERSION = 1

Status = Literal["ok", "failed", "skipped"]
EngineName = Literal[NAMES]

T = TypeVar("T")


class SchemaError(ValueError):
    """A document does not match the fact schema; the message starts with where ($.runs[0].repeat)."""


class _Part(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What every part of a fact is: immutable and strict about its keys.

    Each part also says `kw_only=True` itself: msgspec applies that to a class's own fields only.
    """


class Gpu(_Part, kw_only=True):
    """One GPU as `nvidia-smi` reports it."""

    index: int
    name: str
    memory_total_mib: int | None = None
    uuid: str | None = None


class HostFacts(_Part, kw_only=True):
    """What the host was, so numbers from different hosts can be told apart."""

    hostname: str
    cpu_model: str | None = None
    cpu_count: int | None = None
    mem_total_mib: int | None = None
    kernel: str | None = None
    python: str | None = None
    gpus: list[Gpu] = msgspec.field(default_factory=list)
    gpu_driver: str | None = None
    cuda_version: str | None = None
    gpu_topology: str | None = None


class ModelIdentity(_Part, kw_only=True):
    """Which model files were served, as the host saw them: a checkpoint replaced under the same
    path changes its size, mtime or digest, which the nightly regression reports."""

    path: str
    bytes: int | None = None
    mtime: float | None = None  # epoch seconds
    digest: str | None = None  # the host's hash of the file header / config.json


class Engine(_Part, kw_only=True):
    """The inference engine that served this config."""

    name: EngineName
    model: str
    launcher: str
    version: str | None = None
    model_identity: ModelIdentity | None = None


class Launch(_Part, kw_only=True):
    """Exactly what was started (secrets redacted)."""

    argv: list[str]
    env: dict[str, str]
    log_path: str | None = None
    pid: int | None = None


class SpecStats(_Part, kw_only=True):
    """Speculative-decoding counters scoped to one run (never since boot)."""

    drafted: int | None = None
    accepted: int | None = None
    verify_steps: int | None = None
    accept_length: float | None = None
    accept_rate: float | None = None
    # Verify steps by drafts accepted, [k]: steps that accepted k drafts (the bonus token not
    # counted), summed over the run's requests: SGLang's per-request spec_correct_drafts_histogram.
    # None where the engine does not report it (llama.cpp gives totals only).
    accepted_histogram: list[int] | None = None


class Interference(_Part, kw_only=True):
    """What else used the host while one run was measured: a repeat taken beside other work is
    flagged and counted, not silently averaged in with the quiet ones."""

    load_avg_1m: float | None = None  # over the run, from /proc/loadavg
    cpu_mhz: float | None = None  # mean current frequency where the kernel exposes it
    gpu_other_pids: list[int] = msgspec.field(default_factory=list)  # compute apps not ours
    cpu_other_cores: float | None = None  # mean cores busy with others' processes over the run
    flagged: bool = False
    reason: str | None = None  # one phrase for the table when flagged


class ServerLoad(_Part, kw_only=True):
    """The server's own count of requests over one run's measured window, sampled from its metrics
    endpoint every `interval_s` (roles/benchmark/files/specsweep_serverload.py, which cites each
    engine's source): the client counts what it sent, the server says how many of those it ran and
    how many waited in its queue (SGLang caps running requests at 48 with speculation; llama-server
    has -np slots). None on a run: no server figure (no metrics, or no sample inside the window)."""

    running_metric: str  # sglang:num_running_reqs, llamacpp:requests_processing
    queued_metric: str  # sglang:num_queue_reqs, llamacpp:requests_deferred
    interval_s: float
    samples: int  # taken inside the window
    running_mean: float
    running_median: float
    running_max: float
    queued_mean: float
    queued_max: float


class RequestResult(_Part, kw_only=True):
    """One streamed request as the on-host client measured it."""

    prompt_id: str
    output_tokens: int
    ttft_s: float
    e2e_s: float
    decode_tps: float | None
    itl_s: list[float] = msgspec.field(default_factory=list)
    text: str = ""
    error: str | None = None
    # Prompt tokens as the server counted them (None: an older client, or the engine did not say).
    input_tokens: int | None = None


class Run(_Part, kw_only=True):
    """One repeat of the prompt set at one concurrency."""

    repeat: int
    concurrency: int
    duration_s: float
    requests: list[RequestResult]
    spec: SpecStats = msgspec.field(default_factory=SpecStats)
    # The traffic this run sent (a named workload, e.g. chat or code); None: the one prompt set.
    workload: str | None = None
    # Time-weighted mean of requests in flight over the measured window (None: not measured).
    achieved_concurrency: float | None = None
    interference: Interference | None = None
    # The load generator's window (docs/load.md): every request it sent this run, ramp and drain
    # included (`requests` holds only those sent and done inside the window), the window's bounds
    # in epoch seconds (`duration_s` is its length), and the output tokens generated and requests
    # served inside it (a straddling request counted by the share of its time inside).
    requests_sent: int | None = None
    window_start_at: float | None = None
    window_end_at: float | None = None
    window_output_tokens: float | None = None
    window_requests: float | None = None
    server_load: ServerLoad | None = None


class WorkloadSet(_Part, kw_only=True):
    """One named workload a run sent (analysis.workloads): where its records came from, never their text."""

    name: str
    source: str  # the pinned package (name==version), or file:<format> for the operator's own traffic
    records: int
    sha256: str  # of the records as sent (analysis.workloads.records.digest)
    output_len: Literal["fixed", "dataset"] = "fixed"


class BenchmarkSettings(_Part, kw_only=True):
    """How the runs were produced, so two facts can be checked comparable."""

    client: str
    prompt_set: str
    prompt_sha256: str
    max_tokens: int
    warmup: int
    repeats: int
    concurrency: list[int]
    # The named workloads measured at every level (empty: the one prompt set, prompt_set).
    workloads: list[WorkloadSet] = msgspec.field(default_factory=list)
    # How each level was driven (docs/load.md): requests per level and repeat (None: 4 x c, at
    # least one pass over the prompts) or a duration, open-loop arrivals per second (None: closed
    # loop), the seed of the prompts sampled.
    requests: int | None = None
    duration_s: float | None = None
    request_rate: float | None = None
    seed: int | None = None
    # The levels this launch measured where not every one: a finalist's relaunch measures only its
    # close calls ("chat:4", or "4" of a plain prompt set; analysis.running.prior.finalist_levels).
    only: list[str] | None = None
    # A level that stops when it knows enough (docs/load.md): the tok/s CI half-width it stopped at,
    # its minimum units and its time budget per level (its repeats shared it; before 2026-12-07 each
    # repeat had it whole); None: every level sent its count. Or, instead of the interval, what its
    # host's next launch would cost (s) and its launch-to-launch CV (%): each level sent what was
    # worth sending in one launch (analysis.sweep.levelsize).
    ci_pct: float | None = None
    min_requests: int | None = None
    level_budget_s: float | None = None
    launch_cost_s: float | None = None
    launch_cv_pct: float | None = None


class Timings(_Part, kw_only=True):
    """Wall-clock phases of this config, seconds; epoch seconds for *_at."""

    started_at: float
    finished_at: float
    ready_at: float | None = None
    load_s: float | None = None
    bench_s: float | None = None


class Failure(_Part, kw_only=True):
    """Why a config produced no numbers: data, not a missing file."""

    phase: str
    cause: str
    message: str
    log_tail: list[str] = msgspec.field(default_factory=list)
    # The load level a benchmark stopped at (its server died): the failure counts there, and the
    # levels measured before it keep their runs; None: the whole config failed.
    concurrency: int | None = None


class Suite(_Part, kw_only=True):
    """Provenance of the measuring code itself."""

    git_rev: str | None = None
    version: str | None = None


class Prefetch(_Part, kw_only=True):
    """The next launch's checkpoint, asked into the page cache as this launch's benchmark began
    (plugins/modules/specsweep_prefetch.py; the reads finish in the background)."""

    files: int
    bytes: int
    missing: list[str] = msgspec.field(default_factory=list)


class Fact(_Part, kw_only=True):
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
    runs: list[Run] = msgspec.field(default_factory=list)
    failure: Failure | None = None
    server_info: dict[str, Any] = msgspec.field(default_factory=dict)
    suite: Suite = msgspec.field(default_factory=Suite)
    # Which launch of this config on this host in this sweep (1-based): a config launched again
    # (-e launches=N, the baseline measured again at the end) is a new fact, never an overwrite.
    launch_index: int = 1
    # Racing (-e race=true) did not run this launch (status skipped): why the config lost, in words.
    raced_out: str | None = None
    # The launch spread the plan took for this host's one-launch verdicts (None: older facts, which
    # were judged on the assumed spread, analysis.report.compare.LAUNCH_CV_PRIOR).
    launch_prior: LaunchPrior | None = None
    # -e prefetch: what was read ahead for the next launch during this one's benchmark (None: off).
    prefetch: Prefetch | None = None
    # Required, unlike the writer's other defaults: a document that does not say its version
    # cannot be migrated, and is refused rather than guessed.
    schema_version: int


def _schema_error(exc: msgspec.ValidationError) -> SchemaError:
    """msgspec's "Expected `int`, got `str` - at `$.runs[0].repeat`" as "$.runs[0].repeat: expected ..."."""
    message, at, where = str(exc).rpartition(" - at `")
    if not at:  # the document itself
        message, where = str(exc), "$`"
    return SchemaError(f"{where[:-1]}: {message[:1].lower()}{message[1:]}")


def from_dict(tp: type[T], data: Any) -> T:
    """A fact, or any part of one, from parsed JSON; SchemaError names the field at fault."""
    try:
        return msgspec.convert(data, tp)
    except msgspec.ValidationError as exc:
        raise _schema_error(exc) from exc


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    """Bring an older fact document to SCHEMA_VERSION, or refuse it clearly."""
    version = data.get("schema_version")
    if version == SCHEMA_VERSION:
        return data
    raise SchemaError(f"schema_version {version!r} is not supported (this analysis reads {SCHEMA_VERSION})")


def load_fact(data: Any) -> Fact:
    """A fact from a parsed JSON document, migrated to this version first."""
    if not isinstance(data, dict):
        raise SchemaError("$: expected an object")
    return from_dict(Fact, migrate(data))


_DECODER = msgspec.json.Decoder(Fact)


def decode_fact(raw: bytes) -> Fact:
    """A fact straight from a file's bytes: typed while it is parsed, no dicts in between.

    A report reads thousands of facts, so this is the fast path; a document it cannot take as a
    current fact (an older version, or a bad one) goes through `load_fact`, which migrates it or
    says what is wrong. ValueError when the bytes are not JSON.
    """
    try:
        fact = _DECODER.decode(raw)
    except msgspec.ValidationError:  # a subclass of DecodeError: before it
        fact = None
    except msgspec.DecodeError as exc:
        raise ValueError(f"not valid JSON: {exc}") from exc
    if fact is not None and fact.schema_version == SCHEMA_VERSION:
        return fact
    return load_fact(msgspec.json.decode(raw))


def to_dict(part: msgspec.Struct) -> dict[str, Any]:
    """A fact (or a part of one) as plain JSON types, for writing; the inverse of load_fact."""
    return msgspec.to_builtins(part)
