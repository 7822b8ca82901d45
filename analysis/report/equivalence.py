"""Output equivalence: does a speculative config produce the baseline's text for the same prompt?

Under greedy decoding speculation must not change the text, but float ties (CPU kernels, batch
shape) can make it diverge late. This is reported, never a failure. Positions count
whitespace-separated words of the baseline's text, 0-based: words are what a reader can find in
the text, and they do not depend on a tokenizer the report does not have (a token index would
differ between engines and models). The character offset is kept as well.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# A request is compared with the baseline's request of the same group, load, repeat and prompt.
PAIR = ["group", "workload", "concurrency", "repeat", "prompt_id"]


def first_difference(base: str, other: str) -> tuple[int, int] | None:
    """(word index, char offset) of the first place `other` departs from `base`; None if equal."""
    if base == other:
        return None
    # Binary search on the common prefix: each probe is one C-level slice comparison.
    lo, hi = 0, min(len(base), len(other))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if base[:mid] == other[:mid]:
            lo = mid
        else:
            hi = mid - 1
    prefix = base[:lo]
    words = len(prefix.split())
    # The prefix ends inside a word that one side goes on spelling ("beta" vs "betamax"): that
    # word is the first to differ. Otherwise the next word is (or the whitespace before it).
    after = base[lo : lo + 1] + other[lo : lo + 1]
    in_word = bool(prefix) and not prefix[-1].isspace() and any(not c.isspace() for c in after)
    return (words - 1 if in_word else words), lo


def pairs(requests: pd.DataFrame, group_of: pd.Series, baseline_facts: pd.Index) -> pd.DataFrame:
    """Each answered request that has a baseline counterpart, with where its text departs from it."""
    # group_of: fact_id -> comparison group (sweep, host, engine, model); baseline_facts: the facts
    # that are their group's baseline. Columns out: fact_id, concurrency, repeat, prompt_id,
    # diverge_word, diverge_char (<NA> when the texts are equal).
    ok = requests[requests["error"].isna()]
    # Greedy outputs mostly repeat across configs: compare dictionary codes, and look for the
    # first difference once per distinct (baseline text, text) pair, not once per request.
    codes, texts = pd.factorize(ok["text"], use_na_sentinel=False)
    fact = ok["fact_id"].to_numpy(dtype="int64")
    keys = pd.DataFrame(
        {
            "group": group_of.reindex(fact).to_numpy(),
            "workload": ok["workload"].to_numpy(),
            "concurrency": ok["concurrency"].to_numpy(),
            "repeat": ok["repeat"].to_numpy(),
            "prompt_id": pd.factorize(ok["prompt_id"])[0],
        }
    )
    pair = keys.groupby(PAIR, sort=False, dropna=False).ngroup().to_numpy()
    is_base = np.isin(fact, baseline_facts.to_numpy())
    base = pd.Series(codes[is_base], index=pair[is_base])
    base = base[~base.index.duplicated()]
    other = ~is_base
    base_code = base.reindex(pair[other]).to_numpy()
    found = pd.DataFrame(
        {
            "fact_id": fact[other],
            "workload": keys["workload"].to_numpy()[other],
            "concurrency": keys["concurrency"].to_numpy()[other],
            "repeat": keys["repeat"].to_numpy()[other],
            "prompt_id": ok["prompt_id"].to_numpy()[other],
            "base_code": base_code,
            "code": codes[other],
        }
    )
    found = found[found["base_code"].notna()].astype({"base_code": "int64"})
    differ = found[found["base_code"] != found["code"]]
    distinct = differ[["base_code", "code"]].drop_duplicates()
    where = [first_difference(texts[b], texts[c]) for b, c in distinct.itertuples(index=False, name=None)]
    distinct = distinct.assign(
        diverge_word=pd.array([w[0] if w else None for w in where], dtype="Int64"),
        diverge_char=pd.array([w[1] if w else None for w in where], dtype="Int64"),
    )
    return found.merge(distinct, on=["base_code", "code"], how="left").drop(columns=["base_code", "code"])


def summary(requests: pd.DataFrame, group_of: pd.Series, baseline_facts: pd.Index) -> pd.DataFrame:
    """Per (fact_id, workload, concurrency): requests compared, how many diverged, where first."""
    found = pairs(requests, group_of, baseline_facts)
    return (
        found.groupby(["fact_id", "workload", "concurrency"], sort=False, dropna=False)
        .agg(
            text_compared=("repeat", "size"),
            text_diverged=("diverge_word", "count"),
            diverge_word=("diverge_word", "min"),
        )
        .reset_index()
    )
