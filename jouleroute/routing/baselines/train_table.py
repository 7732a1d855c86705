"""Turn the train profile and query table into the matrices the learned baselines fit on.

One row per training query, one column per candidate: ``correct`` (1/0) and
``energy_j``; a (query, candidate) pair the tournament did not run is NaN, and
each learner masks it out instead of guessing it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)


@dataclass
class TrainTable:
    query_ids: list[str]
    texts: list[str]  # the question of each training query, in query_ids order
    candidates: list[str]
    correct: np.ndarray  # [queries, candidates] in {0, 1, NaN}
    energy_j: np.ndarray  # [queries, candidates], NaN where not run
    energy_source: str  # label(s) of the energies, "+"-joined when the profile mixes them
    tasks: list[str] | None = None  # the task of each training query; None when neither table has a 'task'

    @property
    def observed(self) -> np.ndarray:
        return ~np.isnan(self.correct)

    def candidate_mean_energy_j(self) -> np.ndarray:
        """Mean energy per candidate over its training queries: [candidates]."""
        return np.nanmean(self.energy_j, axis=0)


def _require(frame: pd.DataFrame, columns: set[str], what: str) -> None:
    missing = sorted(columns - set(frame.columns))
    if missing:
        raise ValueError(f"{what} lacks columns {missing}; has {list(frame.columns)}")


def build_train_table(
    profile: pd.DataFrame,
    queries: pd.DataFrame,
    candidates: Sequence[str],
    energy_column: str = "energy_j",
    split: str = "train",
) -> TrainTable:
    """Rows of ``profile`` whose ``split`` is ``split``, joined with the questions in ``queries``.

    Each query's task is read from ``queries`` (else ``profile``) when either has a
    ``task`` column: the embedding baselines strip per-task scaffolding with it.
    """
    _require(profile, {"query_id", "candidate_id", "correct", "split", "energy_source", energy_column}, "profile")
    _require(queries, {"query_id", "question"}, "query table")
    rows = profile[profile["split"] == split]
    if rows.empty:
        raise ValueError(f"profile has no rows with split == '{split}' to train on")
    outside = sorted(set(rows["candidate_id"]) - set(candidates))
    if outside:
        log.info("ignoring profile rows of candidates outside the pool: %s", outside)
        rows = rows[rows["candidate_id"].isin(candidates)]
    unseen = [c for c in candidates if c not in set(rows["candidate_id"])]
    if unseen:
        raise ValueError(f"no '{split}' profile rows for candidates {unseen}; a learned router cannot score them")

    dup = rows.duplicated(["query_id", "candidate_id"])
    if dup.any():
        row = rows.index[dup][0]
        raise ValueError(f"profile row {row}: ({rows.at[row, 'query_id']}, {rows.at[row, 'candidate_id']}) repeated")
    bad_correct = ~pd.to_numeric(rows["correct"], errors="coerce").between(0, 1)
    if bad_correct.any():
        row = rows.index[bad_correct][0]
        raise ValueError(f"profile row {row}: field 'correct' is {rows.at[row, 'correct']}, expected a number in "
                         "[0, 1] (an expected correctness)")
    energy = pd.to_numeric(rows[energy_column], errors="coerce")
    bad_energy = ~np.isfinite(energy)
    if bad_energy.any():
        row = rows.index[bad_energy][0]
        value = rows.at[row, energy_column]
        raise ValueError(f"profile row {row}: field '{energy_column}' is {value}, not a finite number")

    sources = sorted(rows["energy_source"].astype(str).unique())
    if len(sources) > 1:
        log.warning("train profile mixes energy sources %s; predicted energies blend them", sources)

    texts = queries.drop_duplicates("query_id").set_index("query_id")["question"]
    query_ids = sorted(rows["query_id"].astype(str).unique())
    absent = [q for q in query_ids if q not in texts.index]
    if absent:
        raise ValueError(f"{len(absent)} profile queries are missing from the query table (first: {absent[:3]})")

    def tasks_of(frame: pd.DataFrame) -> list[str] | None:
        if "task" not in frame.columns:
            return None
        by_id = frame.drop_duplicates("query_id").set_index("query_id")["task"]
        return [str(by_id[q]) for q in query_ids]

    def matrix(values: pd.Series) -> np.ndarray:
        grid = rows.assign(_v=values.astype(float)).pivot(index="query_id", columns="candidate_id", values="_v")
        return grid.reindex(index=query_ids, columns=list(candidates)).to_numpy(dtype=np.float64)

    return TrainTable(
        query_ids=query_ids,
        texts=[str(texts[q]) for q in query_ids],
        candidates=list(candidates),
        correct=matrix(rows["correct"]),
        energy_j=matrix(energy),
        energy_source="+".join(sources),
        tasks=tasks_of(queries) or tasks_of(rows),
    )
