"""The gateway in front of the two served candidates reads the same exporters (NVML stubbed at the boundary:
tests/served/stub_counter.py), labels its answers measured and exports the measured joules per candidate."""

from __future__ import annotations

import time

import httpx
import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from tests.served.conftest import IDLE_W

PER_TOKEN = 0.5
EXPECTED_J_PER_TOKEN = 0.25  # the profile's expectation: half of what the nodes now draw


def expectation() -> pd.DataFrame:
    return pd.DataFrame([{"candidate_id": c, "energy_j": EXPECTED_J_PER_TOKEN * 10, "energy_source": "measured-nvml",
                          "input_tokens": 0, "output_tokens": 10} for c in ("short", "long")])


def metrics(url: str) -> dict:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_gateway_answers_are_measured_on_the_nodes_and_metrics_export_them(pool):
    from jouleroute.backends.serve import ServerThread
    from jouleroute.gateway.app import create_app
    from jouleroute.gateway.build import attach_measured
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.energy import ExpectedEnergy
    from jouleroute.gateway.measured import MeasuredEnergy
    from jouleroute.gateway.remote import RemoteUpstream
    from jouleroute.gateway.service import Gateway
    from jouleroute.pool import ServedEnergy

    expected = ExpectedEnergy.from_profile(expectation(), prefill_weight=0.0)
    measured = MeasuredEnergy(prefill_weight=0.0, interval_s=0.2)
    upstreams = {}
    for cand, name in (("short", "a"), ("long", "b")):
        energy = ServedEnergy(exporter_url=pool[name]["exporter"], gpus=[0], j_per_output_token=0.1)
        upstreams[cand] = RemoteUpstream(cand, pool[name]["server"], f"tiny-{name}", expected, timeout_s=30,
                                         measured=measured, tracker=measured.tracker(energy))
    gateway = Gateway(GatewayConfig(), None, upstreams)
    attach_measured(gateway)
    tokens = {"short": 0, "long": 0}
    sources = []
    with ServerThread(create_app(gateway)) as v1:
        url = v1.removesuffix("/v1")
        for cand in tokens:  # the first answers start the scraping: they precede the exporters' first reading
            assert httpx.post(f"{v1}/completions", timeout=30, json={"model": cand, "prompt": "Hi",
                                                                      "max_tokens": 2}).status_code == 200
        time.sleep(0.5)
        for round_ in range(4):
            for cand, max_tokens in (("short", 4), ("long", 24)):
                response = httpx.post(f"{v1}/completions", timeout=30, json={
                    "model": cand, "prompt": f"Question: what is {round_} plus 30? Answer:", "max_tokens": max_tokens})
                assert response.status_code == 200, response.text
                tokens[cand] += response.json()["usage"]["completion_tokens"]
                sources.append(response.headers["X-Jouleroute-Energy-Source"])
            time.sleep(0.5)  # a scrape or two: the intervals with answers are read
        time.sleep(0.6)
        m = metrics(url)
    assert sources[-2:] == ["projected:measured-nvml"] * 2  # once an interval is read: its rate, projected
    measured_j = {c: m[("jouleroute_gateway_measured_energy_joules_total",
                        (("candidate", c), ("energy_source", "measured-nvml")))] for c in tokens}
    for cand in tokens:
        # each interval's joules went to the answers in it: their tokens' joules, plus the idle draw meanwhile
        assert PER_TOKEN * tokens[cand] * 0.95 <= measured_j[cand] <= PER_TOKEN * tokens[cand] + IDLE_W * 6
        ratio = m[("jouleroute_gateway_measured_expected_ratio", (("candidate", cand),))]
        assert ratio >= 0.95 * PER_TOKEN / EXPECTED_J_PER_TOKEN  # the nodes draw twice what the profile says (+ idle)
    assert measured_j["long"] > measured_j["short"]
    ups = [v for (name, _), v in m.items() if name == "jouleroute_gateway_exporter_up"]
    assert ups == [1.0, 1.0]
