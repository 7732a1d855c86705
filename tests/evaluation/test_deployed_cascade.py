"""A pool where a cascade beats every router on selection (issue 47): the evaluate stage deploys the cascade,
the headline says so, and `jouleroute serve` with no router options runs its chain over real loopback upstreams
(the bundled OpenAI-compatible server over scripted answers)."""

from __future__ import annotations

import json

import httpx
import numpy as np

from jouleroute.backends.serve import create_app as create_upstream_app
from jouleroute.gateway.app import create_app
from jouleroute.gateway.build import build_gateway
from jouleroute.gateway.cascade import CascadeGateway
from jouleroute.gateway.config import GatewayConfig
from tests.evaluation.test_cascade_section import _pool
from tests.evaluation.test_val_contest import _stage_repo
from tests.gateway.conftest import LiveServer
from tests.gateway.scripted import ScriptedBackend

REPLIES = {"cheap_a": {"Q-easy": "The answer is 42."}, "cheap_b": {"Q-easy": "So it is 42.0\n#### 42"},
           "big": {"Q-easy": "\\boxed{42}"}}


def test_a_cascade_that_beats_every_router_is_deployed_and_served(tmp_path):
    from jouleroute.stages.evaluate import evaluate_stage

    profile, queries = _pool(n=360)  # two cheap models agree exactly when right (70%); big right everywhere at 10 J
    queries["question"] = [f"question number {i}" for i in range(len(queries))]  # nothing a router can read
    profile["input_tokens"] = 20  # the gateway reads expected joules per token from the profile
    ctx = _stage_repo(tmp_path, profile, queries)
    report = evaluate_stage(ctx).report
    deployed = report["deployed"]
    assert deployed["policy"] == "cascade", deployed.get("served")
    assert deployed["deployed"]["stages"][-1] == ["big"] and set(deployed["deployed"]["stages"][0]) == {"cheap_a",
                                                                                                          "cheap_b"}
    kinds = {k["kind"] for k in deployed["kinds"]}
    assert kinds >= {"cascade", "single"} and deployed["routing_on_selection"]["pays"]
    assert deployed["test"]["energy_share_of_best"] < 0.7  # pays on test too: ~2 J + 30% of 10 J against 10 J
    headline = json.loads(ctx.path("headline").read_text())
    assert headline["dep"]["kind"] == "cascade" and "lam" not in headline["dep"]
    assert "the cascade" in (ctx.path("evaluate_dir") / "report.md").read_text()
    assert not (ctx.path("evaluate_dir") / "champion" / "test_decisions.parquet").exists()  # a chain chooses nothing

    servers = {c: LiveServer(create_upstream_app(ScriptedBackend(f"model-{c}", r), f"model-{c}"))
               for c, r in REPLIES.items()}
    gateway_server = None
    try:
        urls = {c: s.start() + "/v1" for c, s in servers.items()}
        cfg = GatewayConfig.model_validate({"auth": {"keys_env": None}, "upstreams": {
            c: {"kind": "openai", "base_url": url, "served_name": f"model-{c}"} for c, url in urls.items()}})
        gateway = build_gateway(ctx.params, ctx.root, cfg)  # no router option: what the report deployed
        assert isinstance(gateway, CascadeGateway)
        gateway_server = LiveServer(create_app(gateway))
        url = gateway_server.start()
        body = {"model": "jouleroute-auto", "messages": [{"role": "user", "content": "Q-easy: six times seven?"}]}
        r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 200, r.text
        assert r.headers["x-jouleroute-cascade-stop"] == "1" and "big" not in r.headers["x-jouleroute-cascade"]
    finally:
        for s in [*servers.values(), *([gateway_server] if gateway_server else [])]:
            s.stop()

    # shuffling the test outcomes, with a cascade in play, changes no choice across kinds, only the test figures
    shuffled = profile.copy()
    rng = np.random.default_rng(0)
    for candidate in shuffled["candidate_id"].unique():
        rows = shuffled.index[(shuffled["split"] == "test") & (shuffled["candidate_id"] == candidate)]
        for column in ("correct", "energy_j", "extracted_answer"):
            shuffled.loc[rows, column] = rng.permutation(shuffled.loc[rows, column].to_numpy())
    shuffled.to_parquet(ctx.path("profile"))
    again = evaluate_stage(ctx).report["deployed"]
    choices = ("policy", "deployed", "kinds", "single", "single_on_selection", "routing_on_selection", "kind_stability")
    assert {k: deployed[k] for k in choices} == {k: again[k] for k in choices}
    assert again["test"]["accuracy"] != deployed["test"]["accuracy"] or \
        again["test"]["j_per_query"] != deployed["test"]["j_per_query"]
