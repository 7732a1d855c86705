"""Synthetic profiles and routers for the evaluation tests (small, deterministic, built in memory)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from jouleroute.evaluation import EvaluateConfig, RouterRun, run_evaluate
from jouleroute.routing.base import RoutingDecisions
from jouleroute.tracking import stage_run

SKILL = {"small": 0.4, "medium": 0.65, "large": 0.9}  # a candidate answers queries easier than its skill
ENERGY = {"small": 1.0, "medium": 4.0, "large": 12.0}  # J/query scale per candidate


def profile_rows(query_ids, tasks, splits, correct, energy, source="estimated") -> pd.DataFrame:
    """Long profile from per-candidate lists: correct[c][i], energy[c][i]."""
    rows = []
    for c in correct:
        for i, q in enumerate(query_ids):
            rows.append({"query_id": q, "candidate_id": c, "task": tasks[i], "split": splits[i],
                         "correct": int(correct[c][i]), "invalid": 0, "latency_s": 0.1 * energy[c][i],
                         "energy_j": float(energy[c][i]), "energy_net_j": float(energy[c][i]) * 0.8,
                         "energy_source": source})
    return pd.DataFrame(rows)


def queries_frame(query_ids, tasks, splits) -> pd.DataFrame:
    return pd.DataFrame({"query_id": query_ids, "task": tasks, "split": splits})


@pytest.fixture(scope="session")
def synthetic():
    """80 queries (60 test, 20 train) on two tasks; correctness set by a hidden difficulty."""
    rng = np.random.default_rng(7)
    n = 80
    qids = [f"{'gsm8k' if i % 2 else 'mmlu'}/{i}" for i in range(n)]
    tasks = [q.split("/")[0] for q in qids]
    splits = ["test" if i < 60 else "train" for i in range(n)]
    difficulty = rng.uniform(0, 1, n)
    correct = {c: difficulty < s for c, s in SKILL.items()}
    energy = {c: e * (1 + 0.1 * rng.uniform(-1, 1, n)) for c, e in ENERGY.items()}
    profile = profile_rows(qids, tasks, splits, correct, energy)
    return {"profile": profile, "queries": queries_frame(qids, tasks, splits), "difficulty": difficulty,
            "test_ids": qids[:60]}


def utility_router(data, lam: float, noise: float = 0.15, source: str = "estimated") -> RoutingDecisions:
    """Pick argmax P(correct) - lam * E with a noisy difficulty estimate; the queries arrive reversed."""
    rng = np.random.default_rng(11)
    ids = list(reversed(data["test_ids"]))
    index = {q: i for i, q in enumerate(data["queries"]["query_id"])}
    est = np.array([data["difficulty"][index[q]] for q in ids]) + rng.normal(0, noise, len(ids))
    names = list(SKILL)
    utility = np.stack([(est < SKILL[c]).astype(float) - lam * ENERGY[c] for c in names], axis=1)
    choice = [names[j] for j in np.argmax(utility, axis=1)]
    return RoutingDecisions(query_ids=ids, candidate_ids=choice, overhead_latency_s=[0.002] * len(ids),
                            overhead_energy_j=[0.01] * len(ids), overhead_energy_source=source)


def make_runs(data, cfg: EvaluateConfig, source: str = "estimated") -> list[RouterRun]:
    runs = [RouterRun(f"utility@{lam:g}", "utility", lam, utility_router(data, lam, source=source))
            for lam in cfg.lambdas]
    rng = np.random.default_rng(3)
    ids = data["test_ids"]
    runs.append(RouterRun("random", "random", None,
                          RoutingDecisions(ids, list(rng.choice(list(SKILL), len(ids))))))
    return runs


EVAL_CFG = EvaluateConfig(bootstrap_samples=200)


@pytest.fixture(scope="session")
def evaluated(synthetic, tmp_path_factory):
    """One full evaluation (plots and MLflow on a sqlite store included), shared because plotting
    and MLflow's schema migration dominate the cost. Yields (result, tracking_uri, root)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    root = tmp_path_factory.mktemp("evaluate")
    uri = f"sqlite:///{root}/mlflow.db"
    tags = {"git_sha": "abc123", "params_hash": "p1"}
    with stage_run(uri, "eval-test", "evaluate", tags, {}) as run:  # the stage's one run, as the stage opens it
        result = run_evaluate(synthetic["profile"], synthetic["queries"], make_runs(synthetic, EVAL_CFG), EVAL_CFG,
                              root / "out", run_tags=tags, run=run)
    return result, uri, root
