"""A fixed rule a user could write by hand: each task to its most accurate candidate on train.

Per task, the candidate with the highest mean (expected) correctness on the train split, ties to the lower
train mean energy, then to pool order; a task unseen on train goes to the most accurate candidate over all
of train. It reads only the profile's ``task`` column, never a task's or a model's name, so it applies to
any pool. It weighs no energy, so every λ gives the same decisions: evaluation reports it as one point,
the rule the issue's "iso-accuracy share below the fixed rule" target compares the LM router with.
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from jouleroute.best_single import best_single
from jouleroute.routing.base import Router, Scores
from jouleroute.routing.baselines.simple import RuleSetup, fixed_scores, query_ids_of
from jouleroute.routing.families import register_family


class TaskBestRouter(Router):
    reference_rule = True  # evaluate routes the test queries with it, beside the learned routers
    name = "task_best"

    def __init__(self, candidates: Sequence[str]):
        super().__init__(candidates)
        self.by_task: dict[str, str] = {}
        self.overall: str | None = None

    @classmethod
    def from_setup(cls, setup: RuleSetup) -> "TaskBestRouter":
        setup.no_argument(cls.name)
        return cls(setup.candidates).fit(setup.profile_train, energy_column=setup.energy_column,
                                         split=setup.train_split)

    def fit(self, profile: pd.DataFrame, energy_column: str = "energy_j", split: str = "train") -> "TaskBestRouter":
        need = {"query_id", "candidate_id", "task", "split", "correct", energy_column}
        missing = sorted(need - set(profile.columns))
        if missing:
            raise ValueError(f"task_best: the profile lacks columns {missing}")
        rows = profile[(profile["split"] == split) & profile["candidate_id"].isin(self.candidates)]
        if rows.empty:
            raise ValueError(f"task_best: no '{split}' profile rows for the pool {self.candidates}")
        def best(frame: pd.DataFrame) -> str:  # the pool's order breaks exact ties
            stats = frame.groupby("candidate_id").agg(acc=("correct", "mean"), joules=(energy_column, "mean"))
            stats = stats.reindex([c for c in self.candidates if c in stats.index])
            return str(stats.index[best_single(stats["acc"], stats["joules"])])

        self.by_task = {str(task): best(group) for task, group in rows.groupby("task")}
        self.overall = best(rows)
        return self

    def score(self, queries: pd.DataFrame) -> Scores:
        if self.overall is None:
            raise RuntimeError("task_best: fit() first")
        if "task" not in queries.columns:
            raise ValueError(f"task_best routes by the queries' 'task' column; got {list(queries.columns)}")
        chosen = [self.by_task.get(str(t), self.overall) for t in queries["task"]]
        return fixed_scores(query_ids_of(queries), self.candidates, chosen)


# not learned in the LearnedRouter sense (no λ, no embedder): evaluate reports it as one fixed point
register_family("task_best", TaskBestRouter, learned=False, rank=6)
