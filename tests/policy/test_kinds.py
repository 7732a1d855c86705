"""Each policy kind is registered once with what it does (policy/kinds.py): how it answers the test split, what it
writes beside champion.json, how the headline and the registry name it; evaluate and the loop ask the registry."""

from __future__ import annotations

from jouleroute.cascade.artifact import ChainArtifact
from jouleroute.policy.choose import CASCADE, ROUTE, SINGLE
from jouleroute.policy.kinds import DEPLOYED_CHAIN, KINDS, kind_of

ROUTED = ["small", "big", "small"]  # the champion router's picks at the deployed λ


def test_a_single_answers_every_query_with_its_model_and_says_so():
    single = {"policy": SINGLE, "single": "big", "deployed": {"kind": SINGLE, "name": "always big", "model": "big"}}
    kind = kind_of(single)
    assert kind.picks(single, ROUTED) == ["big"] * 3
    assert "big serves every query" in kind.serves(single) and kind.tag(single) == "big"
    assert kind.compact({"single": "big"}) == "big" and not kind.routes and kind.write is None


def test_a_route_answers_with_the_champions_picks_at_its_lambda():
    route = {"policy": ROUTE, "lam": 0.1}
    kind = kind_of(route)
    assert kind.picks(route, ROUTED) == ROUTED and kind.serves(route) is None and kind.tag is None
    assert kind.compact({"champion": "mf"}) == "mf" and kind.routes
    assert kind_of({}) is KINDS[ROUTE]  # older metrics without a policy were routes


def test_a_cascade_picks_no_one_model_and_writes_the_chain_the_gateway_serves(tmp_path):
    deployed = {"kind": CASCADE, "name": "small > big", "stages": [["small"], ["big"]], "max_output_tokens": 64}
    cascade = {"policy": CASCADE, "deployed": deployed}
    kind = kind_of(cascade)
    # no sentence of its own on what serves: the paired verdict over the reference single reads as a route's
    assert kind.picks is None and kind.serves(cascade) is None
    assert kind.verdict(cascade).startswith("is passed over: **the cascade `small > big` is deployed**")
    assert kind.tag(cascade) == "small > big" and kind.compact({"deployed_name": "small > big"}) == "small>big"
    kind.write(cascade, tmp_path)
    chain = ChainArtifact.read(tmp_path / DEPLOYED_CHAIN).chain
    assert chain.stages == (("small",), ("big",)) and chain.max_output_tokens == 64


def test_every_kind_is_registered_once_with_its_settings():
    assert set(KINDS) == {SINGLE, ROUTE, CASCADE}
    assert all(kind.settings for kind in KINDS.values())


def test_the_deployed_decisions_keep_a_routes_metered_cost_and_give_a_single_none():
    """evaluation/deployed.py asks the registry: a route's test decisions are the champion's own, with the cost its
    router was metered at; a single model runs no router, so its decisions carry none."""
    from types import SimpleNamespace

    from jouleroute.evaluation.deployed import deployed_decisions
    from jouleroute.routing.scores import RoutingDecisions

    routed = RoutingDecisions(["q1", "q2", "q3"], ROUTED, [0.1] * 3, [2.0] * 3, "estimated")
    scores = SimpleNamespace(decide=lambda lam: routed)
    route = deployed_decisions({"policy": ROUTE, "lam": 0.1}, scores)
    assert route is routed and route.overhead_energy_source == "estimated"
    single = deployed_decisions({"policy": SINGLE, "lam": 0.1, "single": "big"}, scores)
    assert single.candidate_ids == ["big"] * 3 and single.overhead_energy_source == "none"
    assert deployed_decisions({"policy": CASCADE, "lam": 0.1}, scores) is routed  # stands in; its chain is scored
