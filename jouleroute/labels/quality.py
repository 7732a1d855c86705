"""How good labels without gold are, where gold exists: precision and recall of "correct", and agreement.

Over the (query, candidate) rows both tables hold and the labels label, per task and overall:

- ``precision``: of the answers labelled correct, the share gold says are correct;
- ``recall``: of the answers gold says are correct, the share labelled correct;
- ``agreement``: the share of rows where label and gold say the same (``1 − |label − gold|`` for fractional
  values), each with a percentile bootstrap CI that resamples queries (a query's rows move together: they share
  a reference or a vote), with ``stats``' resampling;
- ``by_candidate``: each candidate's accuracy under the labels beside its accuracy under gold on the same rows:
  what the labels would make a router believe, and what it would cost.

Unlabelled rows are counted, not scored.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jouleroute.stats import SAMPLES, SEED, percentile_interval, resample_counts

KEYS = ["query_id", "candidate_id"]


def label_quality(labels: pd.DataFrame, gold: pd.DataFrame, samples: int = SAMPLES, seed: int = SEED) -> dict:
    """Label quality of ``labels`` (a labelled profile: ``correct`` NaN where unlabelled) against ``gold`` (the
    same pairs graded on gold), per task and overall (module doc)."""
    rows = gold[[*KEYS, "task", "correct"]].rename(columns={"correct": "gold"}).merge(
        labels[[*KEYS, "correct"]].rename(columns={"correct": "label"}), on=KEYS, how="inner", validate="1:1")
    by_task = {str(task): _quality(group, samples, seed) for task, group in rows.groupby("task", sort=True)}
    return {"overall": _quality(rows, samples, seed), "by_task": by_task}


def _quality(rows: pd.DataFrame, samples: int, seed: int) -> dict:
    scored = rows[rows["label"].notna()]
    label, gold = scored["label"].astype(float), scored["gold"].astype(float)
    per_query = pd.DataFrame({"query_id": scored["query_id"], "hit": label * gold, "labelled": label,
                              "gold": gold, "agree": 1.0 - (label - gold).abs(), "rows": 1.0})
    sums = per_query.groupby("query_id", sort=True).sum()
    counts = resample_counts(len(sums), samples, seed) if len(sums) else np.zeros((samples, 0))
    resampled = {c: counts @ sums[c].to_numpy() for c in sums.columns}
    figures = {"rows": len(rows), "labelled_rows": len(scored), "unlabelled_rows": len(rows) - len(scored),
               "queries": int(rows["query_id"].nunique()), "labelled_queries": len(sums)}
    ratios = (("precision", "hit", "labelled"), ("recall", "hit", "gold"), ("agreement", "agree", "rows"))
    for name, top, bottom in ratios:
        figures[name], figures[f"{name}_ci"] = _ratio(sums[top].sum(), sums[bottom].sum(),
                                                      resampled[top], resampled[bottom])
    figures["by_candidate"] = {
        str(c): {"rows": len(g), "labelled_accuracy": round(float(g["label"].mean()), 4),
                 "gold_accuracy": round(float(g["gold"].mean()), 4)}
        for c, g in scored.groupby("candidate_id", sort=True)}
    return figures


def _ratio(top: float, bottom: float, tops: np.ndarray, bottoms: np.ndarray) -> tuple[float | None, list | None]:
    if bottom == 0:
        return None, None
    with np.errstate(divide="ignore", invalid="ignore"):
        values = tops / bottoms
    values = values[np.isfinite(values)]
    return float(top / bottom), (percentile_interval(values) if values.size else None)
