"""The one routing contract: ``Scores.decide`` and ``Scores.rank`` agree, per-query λ, the LM scale."""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.routing.scores import Scores, utility

POOL = ["small", "mid", "big"]


def scores(merit, energy, scale=1.0, norm="max") -> Scores:
    merit = np.asarray(merit, dtype=float)
    return Scores.from_energy([f"q{i}" for i in range(len(merit))], POOL, merit, np.asarray(energy, dtype=float),
                              norm, scale=scale)


def test_rank_starts_with_the_decision_at_every_lambda():
    rng = np.random.default_rng(0)
    s = scores(rng.uniform(size=(50, 3)), rng.lognormal(size=(50, 3)))
    for lam in (0.0, 0.1, 0.5, 2.0, 50.0):
        ranks = s.rank(lam)
        assert [r[0] for r in ranks] == s.decide(lam).candidate_ids
        assert all(sorted(r) == sorted(POOL) for r in ranks)
        values = s.values(lam)
        for row, ranking in zip(values, ranks):  # after the choice, best value first
            rest = [row[POOL.index(c)] for c in ranking[1:]]
            assert rest == sorted(rest, reverse=True)


def test_per_query_lambda_equals_deciding_each_query_alone():
    s = scores([[0.5, 0.7, 0.9], [0.5, 0.7, 0.9]], [[1.0, 2.0, 10.0], [1.0, 2.0, 10.0]])
    together = s.decide(np.array([0.0, 5.0])).candidate_ids
    assert together == [s.decide(0.0).candidate_ids[0], s.decide(5.0).candidate_ids[1]] == ["big", "small"]
    with pytest.raises(ValueError, match="λ must be"):
        s.decide(np.array([0.1, -1.0]))


def test_scale_converts_logits_to_utility_units():
    # logits = 10 x probabilities: with scale 10 every λ decides as the probabilities with scale 1
    rng = np.random.default_rng(1)
    p, e = rng.uniform(size=(40, 3)), rng.lognormal(size=(40, 3))
    for lam in (0.0, 0.3, 1.0, 3.0):
        assert scores(10 * p, e, scale=10.0).decide(lam).candidate_ids == scores(p, e).decide(lam).candidate_ids


def test_a_larger_lambda_never_picks_a_dearer_answer():
    rng = np.random.default_rng(2)
    s = scores(rng.uniform(size=(100, 3)), rng.lognormal(size=(100, 3)))
    chosen = [s.energy_j[np.arange(100), s.choices(lam)] for lam in (0.0, 0.2, 1.0, 10.0)]
    for before, after in zip(chosen, chosen[1:]):
        assert np.all(after <= before + 1e-12)
    assert chosen[0].mean() > chosen[-1].mean()  # the weight did something


def test_utility_is_the_same_rule_for_numpy_and_torch():
    torch = pytest.importorskip("torch")
    merit, cost = np.array([[0.2, 0.9]]), np.array([[0.1, 1.0]])
    as_numpy = utility(merit, cost, 0.5, 2.0)
    as_torch = utility(torch.tensor(merit), torch.tensor(cost), 0.5, 2.0).numpy()
    assert np.array_equal(as_numpy, as_torch) and as_numpy.tolist() == [[0.2 - 0.1, 0.9 - 1.0]]
