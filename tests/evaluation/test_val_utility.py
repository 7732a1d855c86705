"""Choices made on val: the mean utility of a router, the blend it picks, and per-query energy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jouleroute.evaluation.outcomes import build_matrix
from jouleroute.evaluation.val_utility import blend_on_val, energy_error, mean_utility
from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.routing.baselines.embeddings import HashingEmbedder
from jouleroute.routing.registry import build_router
from jouleroute.routing.scores import Scores

POOL = ["small", "big"]


def _profile(rows):
    frame = pd.DataFrame(rows, columns=["query_id", "candidate_id", "correct", "energy_j"])
    frame["split"], frame["task"], frame["energy_source"], frame["latency_s"] = "val", "t", "modelled", 0.1
    queries = frame[["query_id"]].drop_duplicates().assign(split="val", task="t")
    return frame, queries


def test_mean_utility_by_hand():
    profile, queries = _profile([("q1", "small", 1, 1.0), ("q1", "big", 1, 4.0),
                                 ("q2", "small", 0, 1.0), ("q2", "big", 1, 4.0)])
    matrix = build_matrix(profile, queries, "val", "energy_j")
    always_big = Scores(["q1", "q2"], POOL, np.array([[0, 1], [0, 1.0]]), np.zeros((2, 2)), np.zeros((2, 2)))
    # big: right on both, normalized energy 1 (max norm): utility 1 − λ on each query
    assert mean_utility(always_big, matrix, [0.0, 0.5], "max") == pytest.approx(np.mean([1.0, 0.5]))
    always_small = Scores(["q1", "q2"], POOL, np.array([[1, 0], [1, 0.0]]), np.zeros((2, 2)), np.zeros((2, 2)))
    # small: right on q1 only, energy 0.25 of the max: (1 − 0.25λ + 0 − 0.25λ) / 2
    assert mean_utility(always_small, matrix, [0.0, 0.5], "max") == pytest.approx(np.mean([0.5, 0.5 - 0.125]))


def test_blend_weight_follows_the_better_evidence_on_val():
    profile, queries = _profile([(f"q{i}", c, int(c == "big" or i % 2 == 0), e)
                                 for i in range(20) for c, e in (("small", 1.0), ("big", 4.0))])
    matrix = build_matrix(profile, queries, "val", "energy_j")
    ids = [f"q{i}" for i in range(20)]
    knows = np.array([[1.0, 1.0] if i % 2 == 0 else [0.0, 1.0] for i in range(20)])  # exactly right
    blind = np.full((20, 2), 0.5)  # no idea
    energy = np.tile([1.0, 4.0], (20, 1))
    lm, knn = (Scores.from_energy(ids, POOL, m, energy, "max") for m in (blind, knows))
    chosen = blend_on_val(lm, knn, matrix, [0.1, 0.5], "max", [0.0, 0.5])
    assert chosen["weight"] == 0.5 and chosen["val_utility_chosen"] > chosen["val_utility_unblended"]
    chosen = blend_on_val(knn, lm, matrix, [0.1, 0.5], "max", [0.0, 0.5])  # roles swapped: keep the first
    assert chosen["weight"] == 0.0 and chosen["energy"] == "first"


def test_per_query_energy_beats_the_task_mean_when_energy_depends_on_the_query():
    """Synthetic: one task whose answers cost 5x more for 'long' questions; kNN's neighbour energy
    sees that, the task mean cannot."""
    def tables(split, offset, n):
        rows, queries = [], []
        for i in range(offset, offset + n):
            kind = "long essay story" if i % 2 else "short quick fact"
            qid = f"{split}{i}"
            queries.append({"query_id": qid, "task": "t", "split": split, "question": f"{kind} number {i}"})
            for cand, base in (("small", 1.0), ("big", 4.0)):
                rows.append({"query_id": qid, "candidate_id": cand, "task": "t", "split": split, "correct": 1,
                             "energy_j": base * (5.0 if i % 2 else 1.0), "latency_s": 0.1,
                             "energy_source": "modelled"})
        return pd.DataFrame(rows), pd.DataFrame(queries)

    train_profile, train_queries = tables("train", 0, 40)
    val_profile, val_queries = tables("val", 100, 20)
    cfg = BaselinesConfig(embedding={"model": "hashing", "cache_dir": None}, knn={"k": 5})
    knn = build_router("knn", train_profile, train_queries, POOL, cfg, embedder=HashingEmbedder())
    scores = knn.score(val_queries)
    matrix = build_matrix(val_profile, val_queries, "val", "energy_j")
    task_mean = np.tile(train_profile.groupby("candidate_id")["energy_j"].mean()[POOL].to_numpy(), (20, 1))
    as_task_mean = Scores.from_energy(scores.query_ids, POOL, scores.merit, task_mean, "max")
    per_query, mean = energy_error(scores, matrix), energy_error(as_task_mean, matrix)
    assert per_query < 0.5 * mean, (per_query, mean)
