"""A chain's stages and what simulate charges for them (cascade/chain.py, matrix.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from jouleroute.cascade.chain import Chain, simulate
from jouleroute.cascade.matrix import CascadeMatrix, answers_missing, cascade_matrix, read_answer
from jouleroute.evaluation.outcomes import build_matrix
from tests.cascade.pool import POOL, synthetic_pool


@pytest.fixture(scope="module")
def pool():
    profile, queries = synthetic_pool(n=2000, seed=1)
    return profile, cascade_matrix(profile, build_matrix(profile, queries, "train", "energy_j"))


def test_two_cheap_models_that_agree_when_right_reach_the_best_models_accuracy(pool):
    _, m = pool
    out = simulate(Chain((("cheap_a", "cheap_b"), ("best",))), m)
    a, b, best = (m.column(c) for c in ("cheap_a", "cheap_b", "best"))
    both_right = (m.correct[:, a] > 0) & (m.correct[:, b] > 0)
    # accepted exactly when both are right: those are correct, the rest is the best model's
    assert (out.stopped_at == 0).tolist() == both_right.tolist()
    expected = np.where(both_right, 1.0, m.correct[:, best])
    assert np.allclose(out.correct, expected)
    assert out.accuracy >= m.correct[:, best].mean() - 1e-12
    # the cheap pair's energy on every query, plus the best model's on the escalations
    pair = m.energy_j[:, a] + m.energy_j[:, b]
    assert np.allclose(out.energy_j, pair + ~both_right * m.energy_j[:, best])
    assert out.j_per_query < m.energy_j[:, best].mean()
    lat = np.maximum(m.latency_s[:, a], m.latency_s[:, b]) + ~both_right * m.latency_s[:, best]
    assert np.allclose(out.latency_s, lat)
    assert out.stop_share() == pytest.approx([both_right.mean(), 1 - both_right.mean()])
    assert out.sources == {"modelled"}


def test_a_single_stage_accepts_an_extracted_answer_below_the_length_bound(pool):
    _, m = pool
    a, best = m.column("cheap_a"), m.column("best")
    out = simulate(Chain((("cheap_a",), ("best",)), max_output_tokens=200), m)
    short = m.output_tokens[:, a] < 200
    assert (out.stopped_at == 0).tolist() == short.tolist()
    assert np.allclose(out.correct, np.where(short, m.correct[:, a], m.correct[:, best]))
    unbounded = simulate(Chain((("cheap_a",), ("best",))), m)
    assert (unbounded.stopped_at == 0).all()  # every answer was extracted


def test_a_missing_answer_escalates():
    profile, queries = synthetic_pool(n=50, seed=2)
    profile.loc[profile["candidate_id"] == "cheap_a", "extracted_answer"] = None
    m = cascade_matrix(profile, build_matrix(profile, queries, "train", "energy_j"))
    assert not m.answered[:, m.column("cheap_a")].any()
    assert (simulate(Chain((("cheap_a",), ("best",))), m).stopped_at == 1).all()
    assert (simulate(Chain((("cheap_a", "cheap_b"), ("best",))), m).stopped_at == 1).all()


def test_the_last_stage_answers_by_majority_else_its_first_member():
    agree = np.zeros((2, 3, 3), bool)
    agree[:, range(3), range(3)] = True
    agree[0, 1, 2] = agree[0, 2, 1] = True  # query 0: b and c agree, a alone
    m = CascadeMatrix(["q0", "q1"], np.array(["gsm8k"] * 2, object), ["a", "b", "c"],
                      np.array([[0.0, 1, 1], [1, 0, 0]]), np.ones((2, 3)), np.ones((2, 3)),
                      np.full((2, 3), "modelled", object), np.ones((2, 3)), agree)
    out = simulate(Chain((("a", "b", "c"),)), m)
    assert out.correct.tolist() == [1.0, 1.0]  # q0: b (majority); q1: no agreement, the first member a
    assert out.energy_j.tolist() == [3.0, 3.0] and out.latency_s.tolist() == [1.0, 1.0]


def test_chain_rejects_a_candidate_in_two_stages_and_empty_stages():
    with pytest.raises(ValueError, match="twice"):
        Chain((("a", "b"), ("a",)))
    with pytest.raises(ValueError, match="empty"):
        Chain((("a",), ()))
    with pytest.raises(ValueError, match="max_output_tokens"):
        Chain((("a",), ("b",)), max_output_tokens=0)
    assert Chain((("a", "b"), ("c",)), 512).name == "a+b > c [<512 tokens]"


def test_answers_read_from_the_output_text_only_for_multiple_choice():
    assert read_answer("arc_challenge", None, "B\n") == "B"
    assert read_answer("gsm8k", None, "the answer is 12") is None
    assert read_answer("gsm8k", "12", "whatever") == "12"


def test_a_pool_without_answers_says_so_in_one_line():
    rows = pd.DataFrame({"task": ["gsm8k", "gsm8k"], "extracted_answer": [None, None],
                         "output_text": ["12", "13"]})
    reason = answers_missing(rows)
    assert reason and "\n" not in reason and "no answers" in reason
    code = pd.DataFrame({"task": ["mbpp"], "extracted_answer": ["def f(): pass"], "output_text": [""]})
    assert "comparable" in answers_missing(code)
    routerbench = pd.DataFrame({"task": ["winogrande"], "extracted_answer": [None], "output_text": ["A\n"]})
    assert answers_missing(routerbench) is None
    assert answers_missing(synthetic_pool(n=10)[0]) is None


def test_the_matrix_needs_output_tokens():
    profile, queries = synthetic_pool(n=20, seed=3)
    m = build_matrix(profile, queries, "train", "energy_j")
    with pytest.raises(ValueError, match="output_tokens"):
        cascade_matrix(profile.drop(columns="output_tokens"), m)


def test_the_energy_view_is_the_matrix_s(pool):
    profile, _ = pool
    queries = profile[["query_id", "task", "split"]].drop_duplicates("query_id")
    net = cascade_matrix(profile, build_matrix(profile, queries, "train", "energy_net_j"))
    gross = cascade_matrix(profile, build_matrix(profile, queries, "train", "energy_j"))
    chain = Chain((("cheap_a", "cheap_b"), ("best",)))
    assert simulate(chain, net).j_per_query == pytest.approx(0.8 * simulate(chain, gross).j_per_query)
    assert set(POOL) == set(gross.candidates)


def test_take_restricts_every_field_to_the_rows(pool):
    _, m = pool
    part = m.take([3, 1, 1])
    assert part.query_ids == [m.query_ids[3], m.query_ids[1], m.query_ids[1]]
    assert (part.agree == m.agree[[3, 1, 1]]).all() and (part.energy_j == m.energy_j[[3, 1, 1]]).all()
    chain = Chain((("cheap_a", "cheap_b"), ("best",)))
    assert simulate(chain, part).correct.tolist() == simulate(chain, m).correct[[3, 1, 1]].tolist()
