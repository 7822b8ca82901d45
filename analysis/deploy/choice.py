"""What each host gets from a sweep: the config, its exact argv and env on the production port, and
the sweep's figures for that config on that host, which the gates after the restart compare with.

The config is `recommend`'s answer for the host (its host group: one host of one sweep), or the one
named with `config`; either must have completed every repeat there. Where the sweep measured named
workloads, both come from the table of the traffic mix (`mix`, else equal shares), as `recommend`'s
top-level answer does (analysis.report.mix), and so do the figures the gates compare with. The
argv and env are those the sweep launched (plan.json, secrets redacted there and put back from the
host's api key), with the sweep's port replaced by the production one. Everything is checked here,
on the controller, so that bad input is refused before any host is touched.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis import objectives
from analysis.facts.load import LoadResult, load_sweeps
from analysis.redact import REDACTED
from analysis.report import mix as traffic
from analysis.report.cli import build_tables
from analysis.report.recommend import recommend
from analysis.report.sla import Sla
from analysis.stats import t975
from analysis.sweep.hostplan import Document, Entry, PlanError, Sweep, load_document
from analysis.sweep.mix import MixError


class DeployError(ValueError):
    """The request cannot be deployed; the message names the setting and what is wrong."""


@dataclass(frozen=True)
class HostInput:
    """What the controller knows of a host besides the sweep: its production port and api key."""

    name: str
    port: int
    api_key: str = ""


def recommended(step: pd.DataFrame) -> pd.DataFrame:
    """`recommend`'s answer as rows (host, concurrency, config, reason): the one reader of it here."""
    rec = recommend(step)
    return rec[["host", "concurrency", "config", "reason"]].drop_duplicates(["host", "concurrency", "config"])


def with_port(argv: list[str], port: int) -> list[str]:
    """argv with the value of --port (either spelling) replaced by `port`; DeployError without one."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--port" and i + 1 < len(out):
            out[i + 1] = str(port)
            return out
        if arg.startswith("--port="):
            out[i] = f"--port={port}"
            return out
    raise DeployError("the sweep's argv has no --port to put the production port in")


def argv_hash(argv: list[str], env: dict[str, str]) -> str:
    """sha256 of the (redacted) argv and env: the same launch hashes the same on every host."""
    doc = json.dumps({"argv": argv, "env": env}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


def unredact(values: list[str], api_key: str) -> list[str]:
    """The sweep's redacted secret put back from the host's api key."""
    return [v.replace(REDACTED, api_key) for v in values]


def accept_ci(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (host, config, concurrency): the mean accept length of the good repeats and its 95% CI."""
    ok = runs[runs["run_ok"].astype("boolean").fillna(False).astype(bool) & runs["accept_length"].notna()]
    cells = ok.groupby(["host", "config_id", "concurrency"], observed=True)["accept_length"].agg(
        ["mean", "std", "count"]
    )
    half = (t975(cells["count"] - 1) * cells["std"] / cells["count"] ** 0.5).where(cells["count"] > 1)
    return cells.assign(accept_ci_lo=cells["mean"] - half, accept_ci_hi=cells["mean"] + half).reset_index()


def _number(value: Any) -> float | None:
    """A JSON number, or None for a missing one."""
    return None if value is None or pd.isna(value) else float(value)


def _level(step: pd.DataFrame, concurrency: int | None, sweep_id: str) -> int | None:
    """The load level asked for, checked against those measured (None: let each host's answer decide)."""
    levels = sorted({int(c) for c in step["concurrency"].dropna()})
    if concurrency is not None and concurrency not in levels:
        raise DeployError(
            f"concurrency: {concurrency} was not measured by sweep {sweep_id} "
            f"(measured: {', '.join(map(str, levels))})"
        )
    return concurrency if concurrency is not None else (levels[0] if len(levels) == 1 else None)


def _pick(step: pd.DataFrame, host: str, level: int | None, config: str | None) -> tuple[str, int, str]:
    """(config, concurrency, why) for one host: the named config, or recommend's answer."""
    rows = step[step["host"] == host]
    if config is not None:
        at = rows[rows["config"] == config]
        if level is not None:
            at = at[at["concurrency"] == level]
        if at.empty:
            raise DeployError(f"config: {config} was not measured on {host}")
        good = at[at["failures"].eq(0) & at["decode_tps"].notna()]
        if good.empty:
            raise DeployError(
                f"config: {config} did not complete every repeat on {host} ({at['cause'].iloc[0]})"
            )
        if level is None and len(good) > 1:
            raise DeployError(
                f"config: {config} was measured at several levels on {host}; add -e concurrency=N"
            )
        return config, int(good["concurrency"].iloc[0]), "named with -e config"
    answer = recommended(rows)
    if level is not None:
        answer = answer[answer["concurrency"] == level]
    configs = answer["config"].tolist()
    if not configs or not all(isinstance(c, str) for c in configs):
        why = answer["reason"].iloc[0] if len(answer) else "nothing measured there"
        raise DeployError(f"the sweep recommends no config on {host}: {why}")
    if len(set(configs)) > 1:
        said = ", ".join(f"{c} at {int(n)}" for c, n in zip(configs, answer["concurrency"], strict=True))
        raise DeployError(f"the sweep recommends {said} on {host}: choose one with -e concurrency=N")
    return configs[0], int(answer["concurrency"].iloc[0]), str(answer["reason"].iloc[0])


def _entry(plan: Document, host: str, config: str) -> Entry:
    """The plan's launch of `config` on `host`, refused where a lone host cannot run it."""
    hp = plan.hosts[host]
    if hp.follows or hp.followed_by:
        raise DeployError(f"{host} ran a multi-node launch in the sweep; deploy.yml deploys single hosts")
    entry = next((e for e in hp.entries if e.config.id == config), None)
    if entry is None:
        raise DeployError(f"config: {config} is not in the plan of {host}")
    if entry.config.adaptive:
        raise DeployError(f"config: {config} is SGLang's adaptive arm; deploy a static config")
    return entry


def choose(
    sweep_dir: Path,
    hosts: list[HostInput],
    concurrency: int | None = None,
    config: str | None = None,
    result: LoadResult | None = None,
    mix: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Per host: what to deploy and the sweep's figures for it (see the module doc); DeployError if not."""
    plan_path = sweep_dir / "plan.json"
    if not plan_path.is_file():
        raise DeployError(f"from: {sweep_dir} is not a sweep (no plan.json)")
    try:
        plan = load_document(json.loads(plan_path.read_text(encoding="utf-8")))
    except (ValueError, PlanError) as exc:
        raise DeployError(f"from: {plan_path}: {exc}") from None
    sweep_id = plan.sweep.id
    # The objective the sweep was asked to rank on (older sweeps: the default), with its SLOs,
    # picks the config and is what the gate measures again.
    settings = plan.sweep.settings
    objective = objectives.get(settings.objective)
    sla = Sla(settings.sla_ttft_p99_ms, settings.sla_itl_p99_ms)
    if problem := objectives.sla_problem(objective, sla.given):  # a plan.json edited since
        raise DeployError(f"from: sweep {sweep_id}: {problem}")
    result = result or load_sweeps([sweep_dir])
    if result.runs.empty:
        raise DeployError(f"from: sweep {sweep_id} holds no result facts")
    try:
        step, shares = traffic.answer_table(
            build_tables(result, sla=sla, objective=objective).step,
            mix,
            option="mix",
            default=traffic.recorded([sweep_dir]),
        )
    except MixError as exc:
        raise DeployError(str(exc)) from None
    step = step[step["concurrency"].notna()].astype({"host": "object", "config": "object"})
    level = _level(step, concurrency, sweep_id)
    swept = set(step["host"])
    missing = [h.name for h in hosts if h.name not in swept or h.name not in plan.hosts]
    if missing:
        raise DeployError(
            f"{', '.join(missing)}: not measured by sweep {sweep_id} (its hosts: {', '.join(sorted(swept))})"
        )
    accept = accept_ci(result.runs)
    traffic_sent = _traffic(plan.sweep)
    out = {}
    for h in hosts:
        chosen, at, why = _pick(step, h.name, level, config)
        entry = _entry(plan, h.name, chosen)
        argv, env = entry.argv, entry.env
        if (REDACTED in json.dumps([argv, env])) and not h.api_key:
            raise DeployError(
                f"{h.name}: the sweep's launch carries a secret and the host has no api key set"
            )
        row = step[(step["host"] == h.name) & (step["config"] == chosen) & (step["concurrency"] == at)].iloc[
            0
        ]
        acc = accept[
            (accept["host"] == h.name) & (accept["config_id"] == chosen) & (accept["concurrency"] == at)
        ]
        acc_row = acc.iloc[0] if len(acc) else {}
        server = plan.hosts[h.name].server
        if server is None:  # measured, so its server rendered: a plan.json edited since
            raise DeployError(f"from: {plan_path}: {h.name} has no server")
        out[h.name] = {
            "sweep_id": sweep_id,
            "config": chosen,
            "concurrency": at,
            "mix": shares,
            "why": why,
            "engine": server.engine,
            "model": server.model,
            "argv": unredact(with_port(argv, h.port), h.api_key),
            "env": dict(zip(env, unredact(list(env.values()), h.api_key), strict=True)),
            "argv_sha256": argv_hash(with_port(argv, h.port), env),
            "port": h.port,
            "api_key": h.api_key,
            "url": f"http://{server.host}:{h.port}",
            "listen": server.host,
            "health_timeout_s": server.health_timeout_s,
            "sweep": {
                # The objective's median and interval (its unit; the keys predate goodput's req/s),
                # and the SLOs goodput counts requests within, as the gate measures it again.
                "objective": objective.name,
                "unit": objective.unit,
                "sla_ttft_p99_ms": sla.ttft_p99_ms,
                "sla_itl_p99_ms": sla.itl_p99_ms,
                "tok_s": _number(row["score"]),
                "tok_s_ci_lo": _number(row["tps_ci_lo"]),
                "tok_s_ci_hi": _number(row["tps_ci_hi"]),
                "accept_length": _number(acc_row.get("mean")),
                "accept_ci_lo": _number(acc_row.get("accept_ci_lo")),
                "accept_ci_hi": _number(acc_row.get("accept_ci_hi")),
            },
            "benchmark": {
                "max_tokens": settings.max_tokens,
                "warmup": settings.warmup,
                "concurrency": at,
                **traffic_sent,
            },
        }
    return out


def _traffic(sweep: Sweep) -> dict[str, Any]:
    """What the gate's benchmark sends, as the sweep did: its workloads' records (the controller's
    file, named by content; "" for a sweep of the prompt set, the role's own) and its seed."""
    records = sweep.workloads.records if sweep.workloads else ""
    if records and not Path(records).is_file():
        raise DeployError(
            f"from: the workloads sweep {sweep.id} measured ({records}) are gone from this controller; "
            "the gate cannot send the same traffic (sweep again, or deploy from a newer sweep)"
        )
    return {"records": records, "seed": sweep.settings.seed}
