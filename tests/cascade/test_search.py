"""The chain search on selection data (cascade/search.py, target.py): figures, targets, the frontier, no test."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from jouleroute.cascade.chain import simulate
from jouleroute.cascade.matrix import cascade_matrix
from jouleroute.cascade.search import pareto, pareto_points, search
from jouleroute.policy.cascade_choice import choose_chain
from jouleroute.policy.target import Target as CascadeTarget
from jouleroute.evaluation.deployed import selection_matrix
from jouleroute.policy.singles import pick_singles
from tests.cascade.pool import synthetic_pool

TARGETS = [CascadeTarget(energy_share=0.5), CascadeTarget(energy_share=1.0), CascadeTarget(accuracy_floor=0.8),
           CascadeTarget(iso_accuracy=True), CascadeTarget(above_best=0.0)]


def _selection(profile, queries):
    m = cascade_matrix(profile, selection_matrix(profile, queries, "energy_j"))
    return m, m.candidates[pick_singles(m.correct, m.energy_j, 0.0)[0]]


@pytest.fixture(scope="module")
def selected():
    profile, queries = synthetic_pool(n=600, seed=4)
    m, best = _selection(profile, queries)
    return m, best, search(m, best, token_bounds=[None, 150, 300])


def test_every_chain_s_figures_are_its_simulation(selected):
    m, _, space = selected
    rows = np.random.default_rng(0).choice(space.accuracy.size, 60, replace=False)
    for i in rows:
        out = simulate(space.chain(i), m)
        assert out.accuracy == pytest.approx(space.accuracy[i])
        assert out.j_per_query == pytest.approx(space.j_per_query[i])


def test_the_family_holds_singles_pairs_and_three_stages_and_prunes_dear_units(selected):
    m, best, space = selected
    names = {space.chain(i).name for i in range(space.accuracy.size)}
    assert {"best", "cheap_a+cheap_b > best", "cheap_a > mid > best [<150 tokens]",
            "cheap_a+cheap_b > mid > best"} <= names
    assert all(best not in {m.candidates[c] for c in u} for u in space.units)  # a unit as dear as the best is pruned
    assert len(names) == space.accuracy.size  # no chain twice
    assert space.best_accuracy == pytest.approx(m.correct[:, m.column(best)].mean())


def test_targets_are_met_on_selection(selected):
    m, best, space = selected
    best_acc, best_j = space.best_accuracy, space.best_j_per_query
    share = choose_chain(space, m, CascadeTarget(energy_share=0.5))
    assert share.met_on_selection and share.selection["energy_share_of_best"] <= 0.5 + 1e-9
    cheap_enough = space.j_per_query <= 0.5 * best_j + 1e-9
    assert share.selection["accuracy"] == pytest.approx(space.accuracy[cheap_enough].max())
    floor = choose_chain(space, m, CascadeTarget(accuracy_floor=0.8))
    assert floor.selection["accuracy"] >= 0.8
    assert floor.selection["j_per_query"] == pytest.approx(space.j_per_query[space.accuracy >= 0.8].min())
    iso = choose_chain(space, m, CascadeTarget(iso_accuracy=True), tolerance=0.02)
    assert iso.selection["accuracy"] >= best_acc - 0.02 - 1e-12 and iso.selection["target"]["tolerance"] == 0.02
    above = choose_chain(space, m, CascadeTarget(above_best=0.0))
    assert above.met_on_selection and above.selection["accuracy_diff_vs_best_ci"][0] > 0
    assert above.selection["accuracy"] > best_acc and len(above.chain.stages) > 1
    assert sum(above.selection["stop_share"]) == pytest.approx(1.0)


def test_an_unreachable_target_is_reported_with_the_closest_chain(selected):
    m, _, space = selected
    choice = choose_chain(space, m, CascadeTarget(accuracy_floor=1.0))
    assert not choice.met_on_selection and "most accurate" in choice.reason
    assert choice.selection["accuracy"] == pytest.approx(space.accuracy.max())
    tiny = choose_chain(space, m, CascadeTarget(energy_share=0.001))
    assert not tiny.met_on_selection and tiny.selection["j_per_query"] == pytest.approx(space.j_per_query.min())
    far = choose_chain(space, m, CascadeTarget(above_best=0.5))
    assert not far.met_on_selection and "above the best single" in far.reason


def test_a_target_takes_exactly_one_goal():
    with pytest.raises(ValidationError, match="exactly one"):
        CascadeTarget(energy_share=0.5, above_best=0.0)
    with pytest.raises(ValidationError):
        CascadeTarget()
    with pytest.raises(ValidationError):
        CascadeTarget(energy_shares=0.5)


def test_the_frontier_rises_in_accuracy_and_energy(selected):
    _, _, space = selected
    points = pareto_points(space)
    acc = [p["accuracy"] for p in points]
    joules = [p["j_per_query"] for p in points]
    assert acc == sorted(acc) and joules == sorted(joules) and len(set(acc)) == len(acc)
    assert max(acc) == pytest.approx(space.accuracy.max())
    assert joules[0] == pytest.approx(space.j_per_query.min())
    assert len(points) == len(pareto(space))


def test_shuffling_test_outcomes_changes_no_chosen_chain():
    profile, queries = synthetic_pool(n=500, seed=5)
    m, best = _selection(profile, queries)
    space = search(m, best)
    before = [choose_chain(space, m, t).chain for t in TARGETS]
    rng = np.random.default_rng(9)
    shuffled = profile.copy()
    test = shuffled["split"] == "test"
    for column in ("correct", "extracted_answer", "energy_j", "output_tokens", "latency_s"):
        shuffled.loc[test, column] = rng.permutation(shuffled.loc[test, column].to_numpy())
    m2, best2 = _selection(shuffled, queries)
    space2 = search(m2, best2)
    assert best2 == best
    assert [choose_chain(space2, m2, t).chain for t in TARGETS] == before


def test_a_pool_whose_best_single_is_also_its_cheapest_leaves_only_the_singles():
    """Every unit costs at least the best single: all are pruned, and the search still returns the singles (a
    tiny pool, as the pipeline tests' tiny-model run has)."""
    profile, queries = synthetic_pool(n=120, pool={"best": (0.9, 1.0), "dear": (0.5, 5.0), "dearer": (0.4, 9.0)},
                                      seed=2)
    m, best = _selection(profile, queries)
    space = search(m, best, token_bounds=[None, 150])
    choice = choose_chain(space, m, CascadeTarget(iso_accuracy=True), tolerance=0.01, samples=50)
    assert best == "best" and choice.chain.name == "best" and choice.met_on_selection
