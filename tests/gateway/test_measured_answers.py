"""Measured upstream answers through the real app (gateway/measured.py): two scripted upstreams (the bundled
OpenAI-compatible server) whose GPU node is a DCGM-style exporter on loopback (tests/gateway/exporter.py). The
test raises the counters by the joules it says were drawn and drives the scrapes itself after the first one (the
scraping loop's interval is an hour), so which answers each interval holds is decided, not raced.

What is checked: one GPU set is one meter whatever order its GPUs are named in, so its joules are charged once;
GPU sets that overlap on one exporter are refused at the config check and at start-up; an answer's own figure is
a projection at its own candidate's last measured rate, labelled ``projected:measured-nvml``, never another
candidate's rate nor one from before the exporter failed; the joules the intervals settle stay ``measured-nvml``."""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jouleroute.backends.serve import create_app as create_upstream_app
from jouleroute.gateway.app import create_app
from jouleroute.gateway.build import attach_measured
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.energy import Expected, ExpectedEnergy
from jouleroute.gateway.measured import MeasuredEnergy
from jouleroute.gateway.remote import RemoteUpstream
from jouleroute.gateway.service import Gateway
from jouleroute.pool import ServedEnergy
from tests.gateway.conftest import LiveServer
from tests.gateway.exporter import ScriptedExporter
from tests.gateway.scripted import ScriptedBackend

PREFILL = 0.1
EXPECTED = ExpectedEnergy({c: Expected(j, "estimated") for c, j in (("a", 0.01), ("b", 0.02))}, PREFILL)
REPLIES = {"a": {"Q": "The answer is seven."}, "b": {"Q": "Seven, since three plus four is seven."}}


@pytest.fixture(scope="module")
def upstreams():
    """candidate -> its /v1 root."""
    servers = {c: LiveServer(create_upstream_app(ScriptedBackend(f"model-{c}", r), f"model-{c}"))
               for c, r in REPLIES.items()}
    yield {c: s.start() + "/v1" for c, s in servers.items()}
    for server in servers.values():
        server.stop()


@pytest.fixture
def exporter():
    e = ScriptedExporter(gpus=2)
    yield e
    e.stop()


@pytest.fixture
def serve(upstreams, exporter):
    """Start a gateway whose upstreams read ``exporter`` on the GPUs given per candidate; returns (url, measured)."""
    started: list[LiveServer] = []

    def make(gpus: dict[str, list[int]]) -> tuple[str, MeasuredEnergy]:
        measured = MeasuredEnergy(prefill_weight=PREFILL, interval_s=3600.0)  # the test scrapes after the first
        ups = {c: RemoteUpstream(c, upstreams[c], f"model-{c}", EXPECTED, timeout_s=20, connect_timeout_s=2,
                                 measured=measured,
                                 # as gateway/build.py asks for it: the energy only
                                 tracker=measured.tracker(ServedEnergy(exporter_url=exporter.url, gpus=g,
                                                                       j_per_output_token=0.1)))
               for c, g in gpus.items()}
        gateway = Gateway(GatewayConfig.model_validate({"auth": {"keys_env": None}}), None, ups)
        attach_measured(gateway)
        server = LiveServer(create_app(gateway))
        started.append(server)
        url = server.start()
        ask(url, next(iter(gpus)))  # starts the scraping loop, whose first scrape is the first reading
        deadline = time.monotonic() + 20
        while not all(t.up for t in measured.trackers.values()):
            assert time.monotonic() < deadline, "the exporter was never read"
            time.sleep(0.02)
        scrape(measured)  # settles that first answer (no joules drawn yet): the tests start from a clean interval
        return url, measured

    yield make
    for server in started:
        server.stop()


def ask(url: str, candidate: str) -> httpx.Response:
    r = httpx.post(url + "/v1/completions", json={"model": candidate, "prompt": "Q: what is 3 plus 4?",
                                                 "max_tokens": 16}, timeout=30)
    assert r.status_code == 200, r.text
    return r


def weight(r: httpx.Response) -> float:
    usage = r.json()["usage"]
    return usage["completion_tokens"] + PREFILL * usage["prompt_tokens"]


def source(r: httpx.Response) -> str:
    assert r.headers["x-jouleroute-energy-source"] == r.json()["usage"]["jouleroute"]["energy_source"]
    return r.headers["x-jouleroute-energy-source"]


def scrape(measured: MeasuredEnergy) -> None:
    for tracker in measured.trackers.values():
        tracker.scrape()


def samples(url: str, name: str) -> dict[tuple, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {tuple(sorted(s.labels.items())): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == name}


def test_one_gpu_set_named_in_two_orders_is_one_meter_and_its_joules_are_charged_once(serve, exporter):
    url, measured = serve({"a": [0, 1], "b": [1, 0]})
    ask(url, "a")
    ask(url, "b")
    exporter.add({0: 200.0, 1: 200.0})  # 400 J drawn on the two GPUs while both answers ran
    scrape(measured)
    joules = samples(url, "jouleroute_gateway_measured_energy_joules_total")
    assert sum(joules.values()) == pytest.approx(400.0)  # not 400 J per candidate
    assert {dict(k)["energy_source"] for k in joules} == {"measured-nvml"}
    assert len(samples(url, "jouleroute_gateway_exporter_up")) == len(measured.trackers) == 1


def test_an_answer_is_projected_at_its_own_candidates_rate_and_its_interval_settles_it_measured(serve, exporter):
    url, measured = serve({"a": [0], "b": [0]})  # one GPU, one meter, two candidates
    first = ask(url, "a")
    exporter.add({0: 600.0})
    scrape(measured)  # an interval with one answer of a: a's rate is 600 J / its weighted tokens
    rate_a = 600.0 / weight(first)

    b = ask(url, "b")  # b was never measured: a's rate says nothing of b's answers
    assert source(b) == "expected:estimated"
    a = ask(url, "a")  # computed from a past interval, not read: a projection of the measured meter
    assert source(a) == "projected:measured-nvml"
    assert float(a.headers["x-jouleroute-energy-j"]) == pytest.approx(rate_a * weight(a), rel=1e-5)
    assert a.json()["usage"]["jouleroute"]["energy_j"] == pytest.approx(rate_a * weight(a))

    exporter.add({0: 30.0})  # the interval these two answers actually ran in
    scrape(measured)
    both = weight(a) + weight(b)
    joules = samples(url, "jouleroute_gateway_measured_energy_joules_total")
    assert joules == {(("candidate", "a"), ("energy_source", "measured-nvml")):
                      pytest.approx(600.0 + 30.0 * weight(a) / both),
                      (("candidate", "b"), ("energy_source", "measured-nvml")): pytest.approx(30.0 * weight(b) / both)}
    answered = samples(url, "jouleroute_gateway_energy_joules_total")  # the answers' own figures, by their labels
    assert {dict(k)["energy_source"] for k in answered} == {"expected:estimated", "projected:measured-nvml"}
    assert source(ask(url, "b")) == "projected:measured-nvml"  # b has been measured now


def test_a_failed_scrape_drops_the_rates_until_an_interval_is_measured_again(serve, exporter):
    url, measured = serve({"a": [0]})
    ask(url, "a")
    exporter.add({0: 600.0})
    scrape(measured)
    assert source(ask(url, "a")) == "projected:measured-nvml"
    exporter.up = False
    scrape(measured)  # the exporter restarts: nothing is known of the joules drawn meanwhile
    exporter.up = True
    scrape(measured)  # back, but no interval measured since
    again = ask(url, "a")
    assert source(again) == "expected:estimated"  # the profile's expectation, not the rate from before the gap
    exporter.add({0: 20.0})
    scrape(measured)
    measured_again = ask(url, "a")
    assert source(measured_again) == "projected:measured-nvml"  # at the rate measured after the gap
    assert float(measured_again.headers["x-jouleroute-energy-j"]) == pytest.approx(
        20.0 / weight(again) * weight(measured_again), rel=1e-5)


def test_gpu_sets_that_overlap_on_one_exporter_are_refused_in_one_line_naming_both(tmp_path):
    from jouleroute.commands.serve import load_gateway_config
    from jouleroute.config import ParamsError

    def energy(gpus, slash=""):
        return {"exporter_url": "http://gpu1:9400/metrics" + slash, "gpus": gpus, "j_per_output_token": 0.1}

    def config(gpus_a, gpus_b, slash_b=""):
        path = tmp_path / "gateway.yaml"
        path.write_text(f"""gateway:
  upstreams:
    a: {{kind: openai, base_url: "http://gpu1:8001/v1", energy: {energy(gpus_a)}}}
    b: {{kind: openai, base_url: "http://gpu1:8002/v1", energy: {energy(gpus_b, slash_b)}}}
""")
        return load_gateway_config(None, str(path))

    config([0, 1], [1, 0])  # the same GPUs: one meter
    config([0], [1])  # GPUs of their own: two meters
    with pytest.raises(ParamsError) as refused:
        config([0, 1], [1])
    message = str(refused.value)
    assert "\n" not in message and "upstreams.a (gpus [0, 1])" in message and "upstreams.b (gpus [1])" in message
    assert "share gpu [1]" in message and "http://gpu1:9400/metrics" in message
    with pytest.raises(ParamsError, match="share gpu"):  # the same exporter, a trailing slash aside
        config([0, 1], [1], slash_b="/")


def test_pool_exporters_that_overlap_are_refused_at_start_up(tmp_path):
    """Without gateway.upstreams the upstreams read their pool entries' exporters: checked when the gateway
    builds them."""
    from jouleroute.config import Params
    from jouleroute.gateway.build import build_gateway

    def entry(cid, gpus):
        return {"candidate_id": cid, "model": "m", "prompt_style": "chat", "answer_style": "direct",
                "max_new_tokens": 8,
                "energy": {"exporter_url": "http://gpu1:9400/metrics", "gpus": gpus, "j_per_output_token": 0.1}}

    params = Params.model_validate({
        "models": {"m": {"source": "served", "served_name": "m"}},
        "backend": {"kind": "openai", "base_url": "http://127.0.0.1:9/v1"},
        "pool": [entry("a", [0, 1]), entry("b", [1])],
        "energy": {"meter": "estimate"},
        "paths": {"profile": str(tmp_path / "no-profile.parquet")},
        "gateway": {"router": {"kind": "always", "candidate": "a"}, "auth": {"keys_env": None}}})
    with pytest.raises(ValueError, match=r"\(gpus \[0, 1\]\) and .* \(gpus \[1\]\) both read exporter "
                                         r"http://gpu1:9400/metrics and share gpu \[1\]"):
        build_gateway(params, tmp_path)
