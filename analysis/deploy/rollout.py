"""What a rollout decides on the host: its launcher, the state it keeps (deployed.json), whether
that launch already serves there, what a host serves once an interrupted rollout settled, the
words a failed rollout stops with, and which hosts a deploy that stopped early never touched.

roles/deploy reads these through the specsweep_deploy filters; what each host gets is decided
before, on the controller (analysis.deploy.choice).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

LAUNCHERS = ("systemd", "nohup")
# Characters of a failed gate's message kept in the rollout's failure (a log tail can be long).
WHY_CHARS = 300


def launcher(asked: str, systemd_run: Mapping[str, Any]) -> str:
    """The launcher asked for (deploy_launcher); `auto` is systemd where the host runs it, else nohup.
    `systemd_run` is the stat of /run/systemd/system (a skipped task's result where not asked)."""
    if asked == "auto":
        return "systemd" if systemd_run.get("stat", {}).get("isdir", False) else "nohup"
    if asked not in LAUNCHERS:
        raise ValueError(f"deploy_launcher: {asked!r} is not one of: auto, {', '.join(LAUNCHERS)}")
    return asked


def state(target: Mapping[str, Any], how: str, run_id: str) -> dict[str, Any]:
    """What deployed.json keeps of a launch: the plan's entry without its api key (the file is the
    record of what serves, not a secret's), with its launcher and this rollout's run id."""
    return {**{k: v for k, v in target.items() if k != "api_key"}, "launcher": how, "run_id": run_id}


def serves_already(before: Mapping[str, Any], target: Mapping[str, Any], how: str) -> bool:
    """Whether the host serves this launch already (the same argv and env, by their hash, under the
    same launcher): then it is made sure to run, and nothing restarts."""
    return before.get("argv_sha256", "") == target["argv_sha256"] and before.get("launcher", "") == how


def settled_words(settled: Mapping[str, Any], run_id: str) -> str:
    """What a host serves after the settle, in words: this rollout's config (new), the one that
    passed before it (old), or nothing of specsweep's (no deployed.json)."""
    if not settled:
        return "nothing deployed by specsweep"
    which = "new" if settled.get("run_id", "") == run_id else "old"
    return f"{which}: {settled['config']} of sweep {settled['sweep_id']}"


def read_state(slurped: Mapping[str, Any]) -> dict[str, Any]:
    """deployed.json as ansible.builtin.slurp returned it (failed_when: false); {} where the host
    has none: nothing of specsweep's was deployed there."""
    content = slurped.get("content")
    return json.loads(base64.b64decode(content)) if content is not None else {}


def before_words(before: Mapping[str, Any]) -> str:
    """What a failed rollout went back to, in words: the state that passed before, if any."""
    if not before:
        return "what ran before (nothing deployed by specsweep)"
    return f"{before['config']} of sweep {before['sweep_id']}"


def failure_words(failed: Mapping[str, Any], stage: str) -> str:
    """Which gate failed (the verdict's, else the `stage` the rollout was in) and why, on one line,
    the why cut to WHY_CHARS at a word."""
    gate = (failed.get("verdict") or {}).get("gate", stage)
    why = " ".join(str(failed.get("msg", "failed")).split())
    if len(why) > WHY_CHARS:
        why = why[: WHY_CHARS - 3].rsplit(" ", 1)[0] + "..."
    return f"{gate} failed: {why}"


def untouched(
    targets: Sequence[str], started: Collection[str], canary: str, ended: Mapping[str, str]
) -> str | None:
    """The line a deploy that stopped early ends with: the hosts none of its tasks started on, left
    on their old config, and why it stopped (`ended`: how a host ended, 'unreachable' or 'failed',
    for those that did); None when every host was reached."""
    left = [h for h in targets if h not in started]
    if not left:
        return None
    stopped = f"the canary {canary} {ended[canary]}" if canary in ended else None
    stopped = stopped or next((f"{h} {why}" for h, why in ended.items()), "it stopped")
    return f"deploy stopped ({stopped}): {', '.join(left)} not touched, left on their old config"
