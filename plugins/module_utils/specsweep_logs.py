"""Reading an inference server's log and answers: loading phase and failure cause (stdlib only).

The shared patterns here are messages no engine owns: the OS's, CUDA's, torch's, NCCL's and those
of the Python libraries the Python engines load (uvicorn, transformers, huggingface_hub, argparse).
Each engine's own messages are in its entry of specsweep_engines.
"""

from __future__ import annotations

import re

from ansible.module_utils.specsweep_engines import ENGINES

# The causes, most specific first: the first that matches names the failure.
CAUSES = ("port_bind", "out_of_memory", "cuda_graph_capture", "nccl", "model_unsupported",
          "model_not_found", "bad_speculative_config", "bad_argument", "python_exception")  # fmt: skip
# Patterns of messages no engine owns, by cause; an engine's own are in specsweep_engines.
SHARED_PATTERNS: tuple[tuple[str, str], ...] = (
    ("port_bind", r"address already in use|Errno 98"),
    ("out_of_memory", r"out of memory|OutOfMemoryError"),
    (
        "nccl",
        r"NCCL (error|WARN.*timeout)|ncclInternalError|ncclSystemError|NCCL timeout"
        r"|Watchdog caught collective operation timeout",
    ),
    (
        "model_not_found",
        r"No such file or directory|is not a valid model|not a local folder"
        r"|does not appear to have a file named|HFValidationError|RepositoryNotFoundError",
    ),
    ("bad_argument", r"error: (unrecognized|argument|ambiguous)|invalid choice"),
    ("python_exception", r"^\w+(\.\w+)*(Error|Exception): "),
)
_ALL = (*SHARED_PATTERNS, *(f for e in ENGINES.values() for f in e["failures"]))
# One pattern per cause, every engine's messages of it with the shared ones: the log does not say
# which engine wrote it, and the line quoted is the last that shows the cause, whoever's words.
FAILURE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (cause, re.compile("|".join(f"(?:{p})" for c, p in _ALL if c == cause), re.IGNORECASE))
    for cause in CAUSES
    if any(c == cause for c, _ in _ALL)
)

# (phase, pattern) in load order; the last one seen in the log is the current phase.
PHASE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (phase, re.compile(pattern, re.IGNORECASE))
    for phase, pattern in (
        ("loading model", r"load_model: loading model|Load weight begin"),
        ("weights loaded", r"Load weight end"),
        (
            "capturing CUDA graphs",
            r"Capture [\w -]*graph begin",
        ),
        ("warming up", r"warming up|\bwarmup\b"),
        ("listening", r"server is listening|listening on|Uvicorn running on"),
        ("ready", r"fired up and ready to roll|all slots are idle"),
    )
)


def classify_failure(lines: list[str]) -> tuple[str, str]:
    """(cause, the log line that shows it); ('unknown', last line) when nothing matches."""
    for cause, pattern in FAILURE_PATTERNS:
        # Later lines are closer to the death, so search from the end.
        for line in reversed(lines):
            if pattern.search(line.strip()):
                return cause, line.strip()
    return "unknown", lines[-1].strip() if lines else ""


def loading_phase(lines: list[str]) -> str | None:
    """The furthest loading phase the log has reached, if any."""
    phase = None
    for line in lines:
        for name, pattern in PHASE_PATTERNS:
            if pattern.search(line):
                phase = name
    return phase


# A healthy server that answers the proving generation with nothing but 5xx, at least this many times
# over at least this long, is broken, not warming up (one that warms up succeeds or stops failing):
# it fails now, not after the health timeout (SGLang's default is 30 minutes).
GENERATION_ERROR_S = 3.0
GENERATION_ERROR_COUNT = 3


def generation_failure(errors: dict, status: int, body: str, now: float) -> str | None:
    """Count one answer to the proving generation into `errors` (the run of 5xx answers so far:
    since, count, statuses, first body, whether every body was the same); the failure message once
    that run makes the server broken, else None. Any answer below 500 ends the run."""
    if status < 500:
        errors.clear()
        return None
    if not errors:
        errors.update(since=now, count=0, statuses=[], first=body, same=True)
    errors["count"] += 1
    errors["same"] = errors["same"] and body == errors["first"]
    if status not in errors["statuses"]:
        errors["statuses"].append(status)
    took = now - errors["since"]
    if errors["count"] < GENERATION_ERROR_COUNT or took < GENERATION_ERROR_S:
        return None
    statuses = ", ".join(str(s) for s in errors["statuses"])
    bodies = "the same each time" if errors["same"] else "the body differing (the last)"
    return (
        f"server healthy but its generation answered {statuses} {errors['count']} times in {took:.1f} s, "
        f"{bodies}: {body[:500]}"
    )
