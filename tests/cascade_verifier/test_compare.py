"""The equal-energy comparison: the threshold chosen on val, the test figures, the verdict (compare.py)."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.cascade_verifier.compare import auc, choose_threshold, compare_on_test, verifier_chain
from jouleroute.cascade.chain import Chain, simulate
from jouleroute.cascade.matrix import cascade_matrix
from jouleroute.evaluation.outcomes import build_matrix
from tests.cascade.pool import POOL, synthetic_pool

AGREEMENT = Chain((("cheap_a", "cheap_b"), ("best",)))


@pytest.fixture(scope="module")
def splits():
    pool = {**POOL, "cheap_b": (0.55, 1.0)}  # the second cheap model adds a cheap call, not much accuracy
    profile, queries = synthetic_pool(n=1200, pool=pool, seed=1)
    return {s: cascade_matrix(profile, build_matrix(profile, queries, s, "energy_j")) for s in ("val", "test")}


def _signal(m, noise: float, seed: int) -> np.ndarray:
    """A margin that is high where the first is wrong and the final right, blurred by ``noise``."""
    c1, c2 = m.correct[:, m.column("cheap_a")], m.correct[:, m.column("best")]
    return (c2 - c1) + noise * np.random.default_rng(seed).normal(size=len(c1))


def test_the_threshold_spends_at_most_the_target_and_no_less_than_it_must(splits):
    val = splits["val"]
    margin, own = _signal(val, 1.0, 0), np.full(len(val.query_ids), 0.01)
    best_j = val.energy_j[:, val.column("best")].mean()
    for share in (0.2, 0.5, 0.8):
        point = choose_threshold(val, "cheap_a", "best", margin, own, share)
        assert point["j_per_query"] <= share * best_j + 1e-9
        # one more escalation (the next margin down) would break the budget
        chain = verifier_chain(val, "cheap_a", "best", margin, own, point["threshold"])
        rest = margin[~chain["escalated"]]
        more = verifier_chain(val, "cheap_a", "best", margin, own, np.sort(rest)[-2] if rest.size > 1 else -np.inf)
        assert more["energy_j"].mean() > share * best_j
    nothing = choose_threshold(val, "cheap_a", "best", margin, own, 0.0)
    assert nothing["escalated_share"] == 0.0


def test_the_verifier_chain_pays_every_call(splits):
    test = splits["test"]
    margin, own = _signal(test, 0.0, 0), np.full(len(test.query_ids), 0.5)
    chain = verifier_chain(test, "cheap_a", "best", margin, own, 0.5)
    e1, e2 = test.energy_j[:, test.column("cheap_a")], test.energy_j[:, test.column("best")]
    np.testing.assert_allclose(chain["energy_j"], e1 + 0.5 + chain["escalated"] * e2)


def test_a_sharp_verifier_wins_and_a_blind_one_loses_at_equal_energy(splits):
    val, test = splits["val"], splits["test"]
    n_val, n_test = len(val.query_ids), len(test.query_ids)
    target = simulate(AGREEMENT, val).j_per_query / val.energy_j[:, val.column("best")].mean()
    results = {}
    for name, noise in (("sharp", 0.1), ("blind", 100.0)):
        point = choose_threshold(val, "cheap_a", "best", _signal(val, noise, 1), np.zeros(n_val), target)
        results[name] = compare_on_test(test, AGREEMENT, "cheap_a", "best", _signal(test, noise, 2),
                                        np.zeros(n_test), point["threshold"], samples=300)
    sharp, blind = results["sharp"], results["blind"]
    assert sharp["verdict"] == "win" and sharp["accuracy_diff_verifier_minus_random_ci"][0] > 0
    assert blind["verdict"] == "loss"  # random escalation loses to agreement here
    assert abs(blind["accuracy_diff_verifier_minus_random"]) < 0.05
    assert sharp["oracle_at_same_share"]["accuracy"] >= sharp["verifier"]["accuracy"]
    assert sharp["agreement"]["accuracy"] == pytest.approx(simulate(AGREEMENT, test).accuracy)
    lo, hi = sharp["accuracy_diff_verifier_minus_agreement_ci"]
    assert lo <= sharp["accuracy_diff_verifier_minus_agreement"] <= hi


def test_auc_ranks_and_says_when_it_cannot():
    assert auc(np.array([3.0, 2.0, 1.0]), np.array([1, 0, 0])) == 1.0
    assert auc(np.array([1.0, 1.0]), np.array([1, 0])) == 0.5
    assert auc(np.array([1.0, 2.0]), np.array([0, 0])) is None
