"""One rule across kinds (policy/choose.py): a cascade, a router and single models chosen on selection data with
selection's uncertainty; synthetic outcomes, every figure known by construction."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from jouleroute.policy.choose import CASCADE, ROUTE, SINGLE, PolicyOutcomes, choose_across_kinds, singles_as_policies
from jouleroute.policy.target import Target

ISO = Target(iso_accuracy=True)


def _matrix(correct: np.ndarray, energy: np.ndarray, names: list[str]):
    return SimpleNamespace(query_ids=[f"q{i}" for i in range(len(correct))], candidates=names,
                           correct=correct.astype(float), energy_j=energy.astype(float))


def _policy(kind: str, name: str, m, correct: np.ndarray, energy: np.ndarray) -> PolicyOutcomes:
    return PolicyOutcomes(kind, name, "train+val, out of fold", list(m.query_ids), correct.astype(float),
                          energy.astype(float), m.correct[:, 0], m.energy_j[:, 0], {})


def _pool(n: int = 600, seed: int = 0):
    """big: right everywhere at 10 J; small: right on the easy half at 1 J."""
    easy = np.random.default_rng(seed).integers(0, 2, n).astype(bool)
    return _matrix(np.stack([np.ones(n), easy], axis=1), np.tile([10.0, 1.0], (n, 1)), ["big", "small"]), easy


def test_a_cascade_that_beats_every_router_on_selection_is_deployed():
    m, easy = _pool()
    n = len(easy)
    cascade = _policy(CASCADE, "small > big", m, np.ones(n), np.where(easy, 1.0, 11.0))  # ~6 J, right everywhere
    router = _policy(ROUTE, "mf", m, np.ones(n), np.full(n, 8.0))  # right everywhere at 8 J
    out = choose_across_kinds(ISO, [router, cascade, *singles_as_policies(m)], m, 0.01, 0.03, 200, 0, 0.95)
    assert out["policy"] == CASCADE and out["deployed"]["name"] == "small > big"
    assert out["single"] == "big" and out["routing_on_selection"]["pays"]
    assert {k["kind"] for k in out["kinds"]} == {ROUTE, CASCADE, SINGLE}


def test_no_policy_paying_over_the_cheapest_adequate_single_deploys_that_single():
    m, easy = _pool()
    n = len(easy)
    twin = np.ones(n)  # a twin of big at 2 J: the cheapest adequate single
    m = _matrix(np.stack([m.correct[:, 0], m.correct[:, 1], twin], axis=1),
                np.tile([10.0, 1.0, 2.0], (n, 1)), ["big", "small", "twin"])
    router = _policy(ROUTE, "mf", m, np.ones(n), np.full(n, 2.0))  # no cheaper than the twin
    out = choose_across_kinds(ISO, [router, *singles_as_policies(m)], m, 0.01, 0.03, 200, 0, 0.95)
    assert out["policy"] == SINGLE and out["deployed"]["name"] == "twin" and out["single"] == "twin"


def test_a_risky_swap_is_refused_even_when_its_point_estimate_is_within_the_tolerance():
    """A single whose selection accuracy is a hair below the best's (within the tolerance by point estimate) but
    whose paired interval reaches below −margin does not replace the best single."""
    n = 1000
    rng = np.random.default_rng(1)
    noisy = np.ones(n, bool)  # right where big is right, but wrong on 1% of the queries: −0.01
    noisy[rng.choice(n, 10, replace=False)] = False
    m = _matrix(np.stack([np.ones(n), noisy], axis=1), np.tile([10.0, 9.6], (n, 1)), ["big", "almost"])
    loose = choose_across_kinds(ISO, singles_as_policies(m), m, 0.03, 0.03, 200, 0, 0.95)
    assert loose["policy"] == SINGLE and loose["single"] == "almost"  # its interval, about [−0.016, −0.004]
    tight = choose_across_kinds(ISO, singles_as_policies(m), m, 0.03, 0.01, 200, 0, 0.95)
    assert tight["single"] == "big"  # at margin 0.01 its interval reaches below −0.01: the best single stays
    kinds = {k["name"]: k for k in tight["kinds"]}
    assert not kinds["almost"]["admissible"] and kinds["big"]["admissible"]


def test_an_energy_share_target_deploys_the_most_accurate_policy_within_the_share():
    m, easy = _pool()
    n = len(easy)
    cascade = _policy(CASCADE, "small > big", m, np.ones(n), np.where(easy, 1.0, 11.0))
    out = choose_across_kinds(Target(energy_share=0.7), [cascade, *singles_as_policies(m)], m, 0.01, 0.03, 200, 0,
                              0.95)
    assert out["policy"] == CASCADE and out["single"] == "small"


def test_a_one_model_chain_scoring_as_that_model_is_deployed_as_the_single_when_no_policy_meets_the_target():
    """No policy meets a 0.5 energy share (the cheap model is dearer here): the fallback is the cheapest, and a
    chain of the best model alone ties it exactly; equal figures go to the simpler kind."""
    n = 300
    m = _matrix(np.stack([np.ones(n), np.zeros(n)], axis=1), np.tile([10.0, 12.0], (n, 1)), ["big", "dear"])
    alone = _policy(CASCADE, "big", m, np.ones(n), np.full(n, 10.0))  # listed first, as evaluate lists kinds
    out = choose_across_kinds(Target(energy_share=0.5), [alone, *singles_as_policies(m)], m, 0.01, 0.03, 200, 0,
                              0.95)
    assert out["policy"] == SINGLE and out["deployed"]["name"] == "big"
    assert not out["met_on_selection_across_kinds"] and "energy_share 0.5" in out["reason_across_kinds"]


def test_every_policy_kind_is_served_through_one_table_and_a_bad_record_is_one_line():
    import pytest

    from jouleroute.gateway.build import SERVE
    from jouleroute.policy.kinds import KINDS, deployed_policy, describe

    assert set(SERVE) == set(KINDS) == {ROUTE, SINGLE, CASCADE}
    assert describe({"kind": SINGLE, "name": "big", "model": "big"}) == "always big"
    with pytest.raises(ValueError, match="champion.json: 'deployed' names no policy kind .*'router'"):
        deployed_policy({"deployed": {"kind": "router"}}, "champion.json")
    with pytest.raises(ValueError, match=r"champion.json: the deployed cascade policy lacks \['stages'"):
        deployed_policy({"deployed": {"kind": CASCADE, "name": "a > b", "max_output_tokens": None}}, "champion.json")


def test_the_choice_stability_resamples_the_rule_that_made_it():
    """The stability of the deployed policy re-chooses by the same rule: equal figures to the simpler kind, and a
    route that did not pay never deployed in a resample (it measured the undeployed route before)."""
    m, easy = _pool(n=400)
    n = len(easy)
    twin = _policy(ROUTE, "mf", m, np.ones(n), np.full(n, 10.0))  # a router whose every pick is big's
    out = choose_across_kinds(ISO, [twin, *singles_as_policies(m)], m, 0.01, 0.03, 200, 0, 0.95,
                              stability_samples=37)
    assert out["policy"] == SINGLE and out["deployed"]["name"] == "big"
    assert out["kind_stability"] == {"policy": 1.0, "samples": 37}  # was 0.0: ties went to the route listed first
    hair = _policy(ROUTE, "mf", m, np.ones(n), np.random.default_rng(0).normal(9.9, 3.0, n))  # cheaper within noise
    out = choose_across_kinds(ISO, [hair, *singles_as_policies(m)], m, 0.01, 0.03, 200, 0, 0.95)
    ratio = out["routing_on_selection"]["j_ratio_ci"]
    assert not out["routing_on_selection"]["pays"] and ratio[0] < 1 < ratio[1] and out["policy"] == SINGLE
    assert out["kind_stability"]["policy"] == 1.0  # the share choosing big, the deployed single
    assert choose_across_kinds(ISO, [hair, *singles_as_policies(m)], m, 0.01, 0.03, 200, 0, 0.95,
                               stability_samples=0)["kind_stability"] is None  # 0: not measured


def test_without_resamples_nothing_shows_that_a_route_pays():
    """evaluate.bootstrap_samples: 0 leaves every interval untested: a route cheaper by its point estimate alone is
    not called a win, and the single is deployed."""
    m, easy = _pool()
    n = len(easy)
    router = _policy(ROUTE, "mf", m, np.ones(n), np.full(n, 8.0))  # right everywhere at 8 J against big's 10
    tested = choose_across_kinds(ISO, [router, *singles_as_policies(m)], m, 0.01, 0.03, 200, 0, 0.95)
    assert tested["policy"] == ROUTE and tested["routing_on_selection"]["pays"]
    untested = choose_across_kinds(ISO, [router, *singles_as_policies(m)], m, 0.01, 0.03, 0, 0, 0.95)
    assert untested["policy"] == SINGLE and untested["single"] == "big"
    assert not untested["routing_on_selection"]["pays"] and untested["routing_on_selection"]["j_ratio_ci"] is None
