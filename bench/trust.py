"""Do the step table's speedup intervals hold the true effect, and does the next run agree?

Not a test: numbers, not verdicts. Synthetic sweeps of a baseline and three speculative configs
(true speedups 0%, +10%, +30%) on one host at one level, in log tok/s:

    sweep effect (shared by every launch of a sweep; cancels in a speedup)
  + drift (a straight line over the sweep's launches, its end-to-end size N(0, DRIFT))
  + launch effect N(0, LAUNCH) per launch (a fresh server, the moment, what else runs)
  + repeat noise N(0, REPEAT) per repeat, REPEATS per launch

with the defaults measured on this 2-core machine (docs/trust-stats.md). Each design is measured
by the same code as the report (analysis.report.compare.step_table on run rows), all sweeps of a
design in one table. Designs: today's (one launch each, baseline first), the baseline again at
the end (issue 24's default), launches=2 and 3 (random order, baseline again at the end).

Columns: cover: the stated 95% interval holds the true speedup; cover (verdict): the interval the
verdict is taken on holds it (the same but where the CI is within one launch); decisive: verdict
better or worse where the true speedup is not 0; wrong: a decisive verdict whose sign is not the
truth's; contra: two runs of the same sweep (independent replications) give decisive verdicts of
opposite sign, per config pair; today's columns read the interval as today's table did (decisive
where the within-launch CI excludes 0). width: median width of the stated interval, in points.

--real DIR...: sweep folders of repeated runs of one sweep (the README demo), each printed with
its s1 interval and verdict, then each pair (A, B) as one sweep with B's baseline as A's baseline
measured again at the end (what a sweep with the repeated baseline sees), and all runs pooled as
launches of one sweep.

    .venv/bin/python bench/trust.py [--sweeps 400] [--seed 1] [--real results/A results/B ...]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.facts.load import RUN_COLUMNS, frame, load_sweeps
from analysis.report.compare import step_table
from analysis.sweep.config import COLUMNS, make

# Measured on this machine (docs/trust-stats.md): sd of log tok/s.
REPEAT = 0.10  # between repeats of one launch (the demo: 0.02-0.34 as other work comes and goes)
LAUNCH = 0.20  # between launches: issue 24's single-launch speedups spread 0.34, 0.24 a launch
DRIFT = 0.20  # end-to-end drift of one sweep (the rest of that 0.24)
QUIET = {"repeat": 0.02, "launch": 0.02, "drift": 0.02}  # a quiet dedicated host, for comparison
EFFECTS = {"s1": 0.0, "s2": 0.10, "s3": 0.30}  # true speedups (fractions)
DESIGNS = [  # name, launches per config, baseline again at the end, random order
    ("today: 1 launch, baseline first", 1, False, False),
    ("1 launch + baseline again at the end", 1, True, True),
    ("launches=2, random order", 2, True, True),
    ("launches=3, random order", 3, True, True),
]


def _slots(rng: np.random.Generator, launches: int, again: bool, shuffle: bool) -> list[tuple[str, int]]:
    """A sweep's launches in the order they run: (config, launch_index)."""
    names = ["baseline", *EFFECTS]
    order = [(c, k) for k in range(1, launches + 1) for c in names]
    if shuffle:
        order = [order[i] for i in rng.permutation(len(order))]
    if again:
        order.append(("baseline", launches + 1))
    return order


def synthetic(
    rng: np.random.Generator, sweeps: int, launches: int, again: bool, shuffle: bool, sd: dict[str, float]
) -> pd.DataFrame:
    """Run rows of `sweeps` synthetic sweeps of one design."""
    templates = {
        c: make(None if c == "baseline" else int(c[1:]), algorithm="NGRAM") for c in ["baseline", *EFFECTS]
    }
    cols: dict[str, list] = {c: [] for c in RUN_COLUMNS}
    repeats = int(sd["repeats"])
    for s in range(sweeps):
        order = _slots(rng, launches, again, shuffle)
        drift = rng.normal(0.0, sd["drift"]) * np.linspace(0.0, 1.0, len(order))
        level = np.log(30.0) + rng.normal(0.0, 0.3)
        for pos, (name, k) in enumerate(order):
            mean = level + np.log1p(EFFECTS.get(name, 0.0)) + drift[pos] + rng.normal(0.0, sd["launch"])
            tps = np.exp(mean + rng.normal(0.0, sd["repeat"], repeats))
            cfg = templates[name]
            for r, value in enumerate(tps):
                row = dict.fromkeys(RUN_COLUMNS)
                row |= {c: getattr(cfg, c) for c in COLUMNS}
                row |= {
                    "path": f"s{s}/{name}.{k}", "source": "specsweep", "sweep_id": f"s{s}", "host": "h",
                    "engine": "llama_cpp", "engine_version": "1", "model": "m", "config_id": cfg.id,
                    "status": "ok", "started_at": float(pos), "concurrency": 1, "repeat": r,
                    "duration_s": 10.0, "n_requests": 1, "n_errors": 0, "run_ok": True, "failed": False,
                    "decode_tps": float(value), "output_tokens": 128, "fact_id": pos, "run_index": r,
                    "launch_index": k, "interfered": False,
                }  # fmt: skip
                for c, v in row.items():
                    cols[c].append(v)
    return frame(cols, RUN_COLUMNS)


def score(table: pd.DataFrame) -> dict[str, float]:
    """Coverage, decisiveness and contradictions of one design's sweeps (see the module doc)."""
    t = table[table["config"].isin(list(EFFECTS))].reset_index(drop=True)
    truth = t["config"].map(lambda c: EFFECTS[c] * 100.0)
    lo, hi = t["speedup_ci_lo"], t["speedup_ci_hi"]
    vlo, vhi = t["verdict_ci_lo"], t["verdict_ci_hi"]
    old = pd.Series(np.where(lo > 0, "better", np.where(hi < 0, "worse", "within_noise")), index=t.index)
    sign = np.sign(truth)
    out = {
        "cover": float(((lo <= truth) & (truth <= hi)).mean()),
        "cover_verdict": float(((vlo <= truth) & (truth <= vhi)).mean()),
        "width": float((hi - lo).median()),
    }
    for name, words in (("today", old), ("new", t["verdict"])):
        decisive = words.isin(["better", "worse"])
        said = np.where(words.eq("better"), 1, np.where(words.eq("worse"), -1, 0))
        out[f"{name}_decisive"] = float(decisive[sign != 0].mean())
        out[f"{name}_wrong"] = float((decisive & (said != sign)).mean())
        # Replications: sweep 2i against sweep 2i+1, config by config.
        t2 = t.assign(
            _said=said,
            _pair=t["sweep_id"].str[1:].astype(int) // 2,
            _side=t["sweep_id"].str[1:].astype(int) % 2,
        )
        wide = t2.pivot_table(
            index=["_pair", "config"], columns="_side", values="_said", aggfunc="first"
        ).dropna()
        out[f"{name}_contra"] = float((wide[0] * wide[1] < 0).mean())
    return out


def real(folders: list[Path]) -> list[str]:
    """Lines of the real runs' table: each run, each pair with a repeated baseline, all pooled."""
    runs = [load_sweeps([f]).runs for f in folders]
    lines = [
        "| runs | s1 speedup [95% CI] | basis | launches | verdict | baseline drift |",
        "|---|---|---|---|---|---|",
    ]

    def row(label: str, frame_: pd.DataFrame) -> tuple[float, float, str]:
        t = step_table(frame_)
        s1 = t[t["config"].eq("s1")].iloc[0]
        drift = (
            "–"
            if pd.isna(s1["drift_pct"])
            else f"{s1['drift_pct']:+.1f}%{' drifting' if s1['drifting'] else ''}"
        )
        ci = f"[{s1['speedup_ci_lo']:+.1f}, {s1['speedup_ci_hi']:+.1f}]"
        lines.append(
            f"| {label} | {s1['speedup_pct']:+.1f}% {ci} | {s1['ci_basis']} | {s1['launches']} | "
            f"{s1['verdict']} | {drift} |"
        )
        return s1["speedup_ci_lo"], s1["speedup_ci_hi"], s1["verdict"]

    own = [row(f.name, r) for f, r in zip(folders, runs, strict=True)]
    # Runs made before the sweep measured its baseline again get one from each later run; runs
    # that have their own are compared as they are (a borrowed baseline would mix two runs' loads).
    rebaselined = all(r[r["config_id"].eq("baseline")]["launch_index"].nunique() > 1 for r in runs)
    pairs = []
    borrowed = [] if rebaselined else list(itertools.permutations(zip(folders, runs, strict=True), 2))
    for (fa, a), (fb, b) in borrowed:
        later = b[b["config_id"].eq("baseline")].assign(
            sweep_id=a["sweep_id"].iloc[0], launch_index=2, started_at=a["started_at"].max() + 1.0,
            fact_id=b["fact_id"] + 10_000,
        )  # fmt: skip
        both = pd.concat([a.astype(object), later.astype(object)], ignore_index=True)
        pairs.append(row(f"{fa.name} + baseline of {fb.name}", frame(both.to_dict("list"), RUN_COLUMNS)))
    pooled = [
        r.assign(sweep_id="pooled", launch_index=i + 1, fact_id=r["fact_id"] + 10_000 * i)
        for i, r in enumerate(runs)
    ]
    both = pd.concat([p.astype(object) for p in pooled], ignore_index=True)
    row(f"all {len(runs)} pooled as launches", frame(both.to_dict("list"), RUN_COLUMNS))
    judged = own if rebaselined else pairs
    disjoint = sum(a[1] < b[0] or b[1] < a[0] for a, b in itertools.combinations(judged, 2))
    opposite = sum({a[2], b[2]} == {"better", "worse"} for a, b in itertools.combinations(judged, 2))
    what = "runs, each with its own repeated baseline" if rebaselined else "pairs with a repeated baseline"
    lines.append("")
    lines.append(
        f"{what}: {len(judged)}; pairs of them with disjoint s1 intervals: "
        f"{disjoint}; with decisive verdicts of opposite sign: {opposite}"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the synthetic table (and the real runs' table when given)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sweeps", type=int, default=400, help="synthetic sweeps per design (even)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=float, default=REPEAT, help="sd of log tok/s between repeats")
    parser.add_argument("--launch", type=float, default=LAUNCH, help="sd of log tok/s between launches")
    parser.add_argument("--drift", type=float, default=DRIFT, help="sd of a sweep's end-to-end drift (log)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per launch")
    parser.add_argument(
        "--real", type=Path, nargs="*", default=[], help="sweep folders of repeated demo runs"
    )
    args = parser.parse_args(argv)
    sd = {"repeat": args.repeat, "launch": args.launch, "drift": args.drift, "repeats": args.repeats}
    print(
        f"synthetic: {args.sweeps} sweeps per design, repeat sd {args.repeat}, launch sd {args.launch}, "
        f"drift sd {args.drift}, {args.repeats} repeats per launch, true speedups "
        f"{', '.join(f'{c} {e:+.0%}' for c, e in EFFECTS.items())}, seed {args.seed}"
    )
    print()
    print(
        "| host | design | cover | cover (verdict) | width | decisive | wrong | contra "
        "| today: decisive | wrong | contra |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for host, noise in (("this machine", sd), ("quiet", {**QUIET, "repeats": args.repeats})):
        for name, launches, again, shuffle in DESIGNS:
            rng = np.random.default_rng([args.seed, launches, again])
            s = score(step_table(synthetic(rng, args.sweeps, launches, again, shuffle, noise)))
            print(
                f"| {host} | {name} | {s['cover']:.1%} | {s['cover_verdict']:.1%} | {s['width']:.0f} | "
                f"{s['new_decisive']:.1%} | {s['new_wrong']:.1%} | {s['new_contra']:.1%} | "
                f"{s['today_decisive']:.1%} | {s['today_wrong']:.1%} | {s['today_contra']:.1%} |"
            )
    if args.real:
        print()
        print("\n".join(real(args.real)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
