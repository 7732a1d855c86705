"""Per-query energy: on a synthetic profile whose joules depend on the query, ê_c(x) beats the task mean on
val, and a router that decides with task means adopts it because its val utility rises.

The small candidate runs away on "long" questions (20x its joules), the big one barely (1.5x); the words
say which is which, so the dependency-free hashing encoder (baselines.embedding.model: hashing) sees it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jouleroute.evaluation.outcomes import build_matrix
from jouleroute.evaluation.query_energy import adopt_on_val, prediction_errors, task_mean_energy
from jouleroute.routing.base import Router, Scores
from jouleroute.routing.baselines.embeddings import HashingEmbedder
from jouleroute.routing.baselines.query_energy import PerQueryEnergy, QueryEnergyModel

CANDIDATES = ["big", "small"]
BASE = {"big": 10.0, "small": 1.0}
RUNAWAY = {"big": 1.5, "small": 20.0}


def _tables(n: int = 240, seed: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    long = rng.uniform(size=n) < 0.5
    tasks = np.where(np.arange(n) % 2 == 0, "alpha", "beta")
    splits = np.where(np.arange(n) < 160, "train", np.where(np.arange(n) < 200, "val", "test"))
    words = ["apple", "river", "stone", "cloud", "ember", "maple"]
    questions = [f"{'elaborate derivation proof' if l else 'quick fact'} {words[i % 6]} item {i}"
                 for i, l in enumerate(long)]
    queries = pd.DataFrame({"query_id": [f"q{i:03d}" for i in range(n)], "task": tasks, "split": splits,
                            "question": questions})
    rows = []
    for i, q in queries.iterrows():
        for c in CANDIDATES:
            joules = BASE[c] * (RUNAWAY[c] if long[i] else 1.0) * float(np.exp(rng.normal(0, 0.1)))
            rows.append({"query_id": q.query_id, "candidate_id": c, "task": q.task, "split": q.split,
                         "correct": int(c == "big" or not long[i]), "energy_j": joules, "latency_s": 1.0,
                         "energy_source": "modelled"})
    return pd.DataFrame(rows), queries


class TaskMeanRouter(Router):
    """Decides like the LM router's energy side: merit per task from train, energy the task's train mean."""

    def __init__(self, profile: pd.DataFrame):
        super().__init__(CANDIDATES)
        train = profile[profile["split"] == "train"]
        self.train = train
        self.merit = train.groupby(["task", "candidate_id"])["correct"].mean()

    def score(self, queries: pd.DataFrame) -> Scores:
        tasks = queries["task"].tolist()
        merit = np.array([[self.merit[(t, c)] for c in CANDIDATES] for t in tasks])
        energy = task_mean_energy(self.train, "energy_j", CANDIDATES, tasks)
        return Scores.from_energy(queries["query_id"].tolist(), CANDIDATES, merit, energy, "max")


def test_the_predictor_beats_the_task_mean_on_val_and_is_adopted_where_val_utility_rises():
    profile, queries = _tables()
    model = QueryEnergyModel(CANDIDATES, HashingEmbedder(cache_dir=None)).fit(profile, queries)
    val_q = queries[queries["split"] == "val"].reset_index(drop=True)
    m = build_matrix(profile, queries, "val", "energy_j")
    truth = m.energy_j[[m.query_ids.index(q) for q in val_q["query_id"]]]
    predicted = prediction_errors(model.predict(val_q), truth)
    task_mean = prediction_errors(task_mean_energy(profile[profile["split"] == "train"], "energy_j", CANDIDATES,
                                                   val_q["task"].tolist()), truth)
    assert predicted["relative_error"] < 0.5 * task_mean["relative_error"]
    assert predicted["log_rmse"] < 0.5 * task_mean["log_rmse"]
    assert min(model.alpha) < 1e9  # cross-validation moved away from the task mean for some candidate

    router = TaskMeanRouter(profile)
    chosen, report = adopt_on_val({"taskmean": router}, model, val_q, m, profile[profile["split"] == "train"],
                                  "energy_j", [0.0, 0.5, 1.0, 2.0], "max")
    row = report["families"]["taskmean"]
    assert row["adopted"] and row["val_utility_per_query"] > row["val_utility_own"]
    assert isinstance(chosen["taskmean"], PerQueryEnergy)
    assert report["energy_error_val"]["per_query"]["relative_error"] == pytest.approx(predicted["relative_error"])
    # the wrapped router keeps the merit and decides with ê: a long question at λ=1 goes to big, a brief to small
    test_q = queries[queries["split"] == "test"].reset_index(drop=True)
    picks = chosen["taskmean"].route(test_q, lam=1.0).candidate_ids
    long = test_q["question"].str.startswith("elaborate")
    assert all(p == "big" for p in np.array(picks)[long]) and all(p == "small" for p in np.array(picks)[~long])


def test_a_router_whose_energy_is_already_exact_keeps_it():
    """Ties keep the family's own estimate: adoption needs a strictly higher val utility."""
    profile, queries = _tables(n=200)
    model = QueryEnergyModel(CANDIDATES, HashingEmbedder(cache_dir=None)).fit(profile, queries)
    m = build_matrix(profile, queries, "val", "energy_j")
    val_q = queries[queries["split"] == "val"].reset_index(drop=True)

    class Exact(Router):
        def score(self, q: pd.DataFrame) -> Scores:
            rows = [m.query_ids.index(x) for x in q["query_id"]]
            return Scores.from_energy(q["query_id"].tolist(), CANDIDATES, m.correct[rows], m.energy_j[rows], "max")

    _, report = adopt_on_val({"exact": Exact(CANDIDATES)}, model, val_q, m, profile[profile["split"] == "train"],
                             "energy_j", [0.0, 0.5, 1.0], "max")
    assert report["families"]["exact"]["adopted"] is False


def test_a_configured_router_with_query_energy_decides_with_it(tmp_path):
    """`gateway.router.query_energy: true` for a configured router: the router it builds decides with ê, fitted
    at start-up on the profile's train split (gateway/build.py fitted_query_energy; a champion brings the ê
    model evaluate fitted instead, tests/evaluation/test_champion_artifact.py)."""
    from pydantic import BaseModel

    from jouleroute.energy.config import EnergyPolicy
    from jouleroute.gateway.router_build import _with_query_energy, fitted_query_energy
    from jouleroute.paths import PathsConfig
    from jouleroute.routing.baselines.config import BaselinesConfig

    class Params(BaseModel):
        paths: PathsConfig = PathsConfig()
        baselines: BaselinesConfig = BaselinesConfig(embedding={"model": "hashing"})
        energy_policy: EnergyPolicy = EnergyPolicy()
        profile_source: str = "replay"  # no pool order: candidates sorted, as evaluate orders them
        candidate_ids: list[str] = []

    profile, queries = _tables()
    p = Params()
    for name, frame in (("labelled_profile", profile.assign(label_source="gold")), ("queries", queries)):
        path = p.paths.resolve(name, tmp_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(path)
    served = _with_query_energy(p, TaskMeanRouter(profile), lambda: fitted_query_energy(p, tmp_path))
    asked = pd.DataFrame({"query_id": ["x", "y"], "task": ["alpha", "alpha"],
                          "question": ["elaborate derivation proof apple item 1", "quick fact apple item 2"]})
    assert served.route(asked, lam=1.0).candidate_ids == ["big", "small"]
    assert TaskMeanRouter(profile).route(asked, lam=1.0).candidate_ids == ["big", "big"]  # task means: no difference
