"""The gateway's cascade mode against three real loopback upstreams (the bundled OpenAI-compatible server over
scripted answers): agreement stops at the first stage, disagreement asks the next, a dead upstream counts as no
answer with a logged reason, and the joules in the headers are the sum of the calls'."""

from __future__ import annotations

import json
import logging
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jouleroute.backends.serve import create_app as create_upstream_app
from jouleroute.gateway.app import create_app
from jouleroute.cascade.artifact import ChainArtifact
from jouleroute.cascade.chain import Chain
from jouleroute.gateway.cascade import CascadeGateway
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.energy import Expected, ExpectedEnergy
from jouleroute.gateway.remote import RemoteUpstream
from tests.gateway.conftest import LiveServer
from tests.gateway.scripted import ScriptedBackend

REPLIES = {
    "a": {"Q-agree": "Three plus four is 7. The answer is 7.", "Q-differ": "The answer is 12.",
          "Q-none": "I cannot tell."},
    "b": {"Q-agree": "3 + 4 = 7\n#### 7.0", "Q-differ": "The answer is 13.", "Q-none": "Hard to say."},
    "c": {"Q-agree": "It is \\boxed{7}.", "Q-differ": "So the total is \\boxed{12}.", "Q-none": "\\boxed{42}"},
}
CHAIN = Chain((("a", "b"), ("c",)), max_output_tokens=64)
EXPECTED = ExpectedEnergy({c: Expected(j, "estimated") for c, j in (("a", 0.01), ("b", 0.02), ("c", 0.5))}, 0.1)
DEAD = "http://127.0.0.1:9/v1"  # nothing listens on the discard port


@pytest.fixture(scope="module")
def upstreams():
    """candidate -> (/v1 root, its scripted backend)."""
    backends = {c: ScriptedBackend(f"model-{c}", replies) for c, replies in REPLIES.items()}
    servers = {c: LiveServer(create_upstream_app(b, f"model-{c}")) for c, b in backends.items()}
    found = {c: (s.start() + "/v1", backends[c]) for c, s in servers.items()}
    yield found
    for server in servers.values():
        server.stop()


@pytest.fixture
def make_cascade():
    """Start a cascade gateway over ``urls`` (candidate -> /v1 root); stopped after the test."""
    started: list[LiveServer] = []

    def make(urls: dict[str, str], chain: Chain = CHAIN, trackers=None) -> tuple[str, CascadeGateway]:
        cfg = GatewayConfig.model_validate({"router": {"kind": "cascade", "chain": "chain.json"},
                                            "auth": {"keys_env": None}})
        measured, trackers = (trackers or (None, {}))
        upstreams = {c: RemoteUpstream(c, url, f"model-{c}", EXPECTED, timeout_s=20, connect_timeout_s=2,
                                       measured=measured if c in trackers else None, tracker=trackers.get(c))
                     for c, url in urls.items()}
        gateway = CascadeGateway(cfg, chain, upstreams)
        if measured is not None:
            gateway.metrics.registry.register(measured)
        server = LiveServer(create_app(gateway))
        started.append(server)
        return server.start(), gateway

    yield make
    for server in started:
        server.stop()


def urls_of(upstreams, **override) -> dict[str, str]:
    return {c: override.get(c, url) for c, (url, _) in upstreams.items()}


def ask(url: str, question: str, **extra) -> httpx.Response:
    body = {"model": "jouleroute-auto", "messages": [{"role": "user", "content": f"{question}: what is 3 plus 4?"}]}
    return httpx.post(url + "/v1/chat/completions", json=body | extra, timeout=30)


def content(response: httpx.Response) -> str:
    return response.json()["choices"][0]["message"]["content"]


def samples(url: str) -> dict[tuple, float]:
    text = httpx.get(url + "/metrics").text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_agreement_returns_the_first_stage_answer(make_cascade, upstreams):
    url, _ = make_cascade(urls_of(upstreams))
    c_before = len(upstreams["c"][1].asked)
    r = ask(url, "Q-agree")
    assert r.status_code == 200, r.text
    assert r.headers["x-jouleroute-cascade"] == "stage1=a,b" and r.headers["x-jouleroute-cascade-stop"] == "1"
    assert r.headers["x-jouleroute-candidate"] == "a" and r.json()["model"] == "a"
    assert content(r) == REPLIES["a"]["Q-agree"]  # 7 and 7.0 agree: a's own words come back
    assert len(upstreams["c"][1].asked) == c_before  # the costly stage was never asked
    cascade = r.json()["usage"]["jouleroute"]["cascade"]
    assert cascade["stages"] == [["a", "b"]] and cascade["reasons"] == ["agreed"]
    assert [c["answer"] for c in cascade["calls"]] == ["7", "7"]
    assert httpx.get(url + "/readyz").json()["router"] == "cascade (stage1=a,b;stage2=c)"


def test_disagreement_calls_the_next_stage(make_cascade, upstreams):
    url, _ = make_cascade(urls_of(upstreams))
    r = ask(url, "Q-differ")
    assert r.status_code == 200, r.text
    assert r.headers["x-jouleroute-cascade"] == "stage1=a,b;stage2=c" and r.headers["x-jouleroute-cascade-stop"] == "2"
    assert r.headers["x-jouleroute-candidate"] == "c" and content(r) == REPLIES["c"]["Q-differ"]
    assert r.headers["x-jouleroute-cascade-reasons"] == "disagree,checked"
    assert any("Q-differ" in p for p in upstreams["c"][1].asked)
    none = ask(url, "Q-none")  # nothing to read in stage 1: escalated, and the last stage answers
    assert none.headers["x-jouleroute-cascade-reasons"] == "no_answer,checked" and content(none) == "\\boxed{42}"


def test_a_dead_upstream_in_a_stage_escalates_with_a_logged_reason(make_cascade, upstreams, caplog):
    url, gateway = make_cascade(urls_of(upstreams, b=DEAD))
    with caplog.at_level(logging.WARNING, logger="jouleroute.gateway.cascade"):
        r = ask(url, "Q-agree")
    assert r.status_code == 200, r.text
    assert r.headers["x-jouleroute-cascade"] == "stage1=a,b;stage2=c" and r.headers["x-jouleroute-candidate"] == "c"
    assert r.headers["x-jouleroute-cascade-reasons"] == "too_few_answers,checked"
    failed = [c for c in r.json()["usage"]["jouleroute"]["cascade"]["calls"] if c["candidate"] == "b"][0]
    assert "unreachable" in failed["error"] and failed["energy_j"] is None
    assert any("b counts as no answer" in m and DEAD in m for m in caplog.messages), caplog.messages
    assert "b=-" in r.headers["x-jouleroute-cascade-energy-j"].split(",")
    assert "b=failed:502" in r.headers["x-jouleroute-cascade-energy-source"].split(",")
    m = samples(url)
    assert m[("jouleroute_gateway_cascade_failed_calls_total", (("candidate", "b"), ("stage", "1")))] == 1
    assert m[("jouleroute_gateway_upstream_errors_total", (("candidate", "b"), ("status", "502")))] == 1


def test_the_headers_joules_are_the_sum_of_the_calls(make_cascade, upstreams):
    url, _ = make_cascade(urls_of(upstreams))
    totals = []
    for question in ("Q-agree", "Q-differ", "Q-agree"):
        r = ask(url, question)
        calls = dict(item.split("=") for item in r.headers["x-jouleroute-cascade-energy-j"].split(","))
        assert float(r.headers["x-jouleroute-energy-j"]) == pytest.approx(sum(map(float, calls.values())), rel=1e-5)
        usage = r.json()["usage"]["jouleroute"]
        assert usage["energy_j"] == sum(c["energy_j"] for c in usage["cascade"]["calls"]) > 0
        assert r.headers["x-jouleroute-energy-source"] == "expected:estimated" == usage["energy_source"]
        totals.append(usage["energy_j"])
    m = samples(url)
    energy = [v for (name, _), v in m.items() if name == "jouleroute_gateway_energy_joules_total"]
    assert sum(energy) == pytest.approx(sum(totals))  # every call counted once, by its own candidate
    by_stage = {k[1][0][1]: v for k, v in m.items() if k[0] == "jouleroute_gateway_cascade_stops_total"}
    assert by_stage == {"1": 2, "2": 1}
    assert m[("jouleroute_gateway_cascade_escalations_total", (("reason", "disagree"), ("stage", "1")))] == 1
    stage_j = sum(v for (name, _), v in m.items() if name == "jouleroute_gateway_cascade_energy_joules_total")
    assert stage_j == pytest.approx(sum(totals))


def test_a_metered_upstream_is_measured_and_the_total_says_both_sources(make_cascade, upstreams):
    from jouleroute.energy.meter_server import serve_meter
    from jouleroute.gateway.measured import MeasuredEnergy
    from jouleroute.pool import ServedEnergy
    from tests.served.stub_counter import RisingCounter

    exporter, _ = serve_meter(RisingCounter(500.0, gpus=1), "127.0.0.1", 0)
    measured = MeasuredEnergy(prefill_weight=0.1, interval_s=0.05)
    tracker = measured.tracker(ServedEnergy(exporter_url=f"http://127.0.0.1:{exporter.server_port}/metrics", gpus=[0],
                                            j_per_output_token=0.5))
    try:
        url, _ = make_cascade(urls_of(upstreams), trackers=(measured, {"c": tracker}))
        deadline = time.monotonic() + 20
        while True:  # the first answers carry the expectation, until an interval with c's answers has been read
            r = ask(url, "Q-differ")
            sources = dict(i.split("=") for i in r.headers["x-jouleroute-cascade-energy-source"].split(","))
            if sources["c"] == "projected:measured-nvml" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert sources == {"a": "expected:estimated", "b": "expected:estimated", "c": "projected:measured-nvml"}
        assert r.headers["x-jouleroute-energy-source"] == "expected:estimated+projected:measured-nvml"
        usage = r.json()["usage"]["jouleroute"]
        assert usage["energy_j"] == sum(c["energy_j"] for c in usage["cascade"]["calls"])
    finally:
        exporter.shutdown()
        exporter.server_close()


def test_a_stream_gets_the_accepted_answer_as_one_chunk(make_cascade, upstreams):
    url, _ = make_cascade(urls_of(upstreams))
    r = ask(url, "Q-differ", stream=True, stream_options={"include_usage": True})
    assert r.status_code == 200 and r.headers["x-jouleroute-cascade"] == "stage1=a,b;stage2=c"
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    texts = [c["choices"][0]["delta"].get("content") for c in chunks if c.get("choices")]
    assert [t for t in texts if t] == [REPLIES["c"]["Q-differ"]]
    usage = chunks[-1]["usage"]["jouleroute"]
    assert usage["cascade"]["stop_stage"] == 2 and usage["energy_j"] == pytest.approx(
        float(r.headers["x-jouleroute-energy-j"]), rel=1e-5)


def test_a_failed_last_stage_is_a_502_that_names_the_chain(make_cascade, upstreams):
    url, _ = make_cascade(urls_of(upstreams, c=DEAD))
    r = ask(url, "Q-differ")
    assert r.status_code == 502 and r.json()["error"]["code"] == "cascade_failed"
    assert DEAD in r.json()["error"]["message"]
    assert r.headers["x-jouleroute-cascade"] == "stage1=a,b;stage2=c"
    assert ask(url, "Q-agree").status_code == 200  # stage 1 still answers what it agrees on


def test_a_named_candidate_is_proxied_without_the_cascade(make_cascade, upstreams):
    url, _ = make_cascade(urls_of(upstreams))
    r = ask(url, "Q-differ", model="b")
    assert r.status_code == 200 and content(r) == REPLIES["b"]["Q-differ"]
    assert "x-jouleroute-cascade" not in r.headers and r.headers["x-jouleroute-candidate"] == "b"
    assert httpx.get(url + "/v1/models").json()["data"][0]["id"] == "jouleroute-auto"


def test_serve_builds_the_cascade_from_params(tmp_path, upstreams, monkeypatch):
    """``jouleroute serve`` with ``gateway.router.kind: cascade``: the chain file, the configured upstreams."""
    from types import SimpleNamespace

    import uvicorn

    from jouleroute.commands.serve import serve_command
    from jouleroute.config import Params

    ChainArtifact(CHAIN, "by hand", {}).write(tmp_path / "chain.json")
    params = Params.model_validate({
        "energy": {"meter": "estimate"}, "paths": {"profile": str(tmp_path / "no-profile.parquet")},
        "gateway": {"router": {"kind": "cascade", "chain": "chain.json"}, "auth": {"keys_env": None},
                    "upstreams": {c: {"kind": "openai", "base_url": url, "served_name": f"model-{c}"}
                                  for c, url in urls_of(upstreams).items()}}})
    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    serve_command(SimpleNamespace(params=params, root=tmp_path), SimpleNamespace(config=None, host=None, port=None))
    server = LiveServer(served["app"])
    try:
        r = ask(server.start(), "Q-differ")
        assert r.status_code == 200 and r.headers["x-jouleroute-router"] == "cascade:chain"
        assert r.headers["x-jouleroute-cascade-stop"] == "2"
        assert r.headers["x-jouleroute-energy-source"] == "unavailable"  # no profile: no figure is guessed
        assert "x-jouleroute-energy-j" not in r.headers
    finally:
        server.stop()


TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("field, value", [("n", 2), ("logprobs", True), ("top_logprobs", 2), ("tools", [TOOL])])
def test_a_field_the_cascade_cannot_honour_is_refused_by_name_not_dropped(make_cascade, upstreams, field, value):
    """The cascade returns one text answer, the one its stages accepted: ``n`` > 1, log probabilities and tool calls
    would be dropped from it, so they get an OpenAI-shaped 400 naming the field, and no candidate is asked."""
    url, _ = make_cascade(urls_of(upstreams))
    asked = {c: len(backend.asked) for c, (_, backend) in upstreams.items()}
    for stream in (False, True):
        r = ask(url, "Q-agree", stream=stream, **{field: value})
        assert r.status_code == 400, r.text
        error = r.json()["error"]
        assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "unsupported_parameter",
                                                                   field)
        assert error["message"].startswith(f"'{field}' is not supported in cascade mode (got {field}=")
        assert "or name a candidate as the model" in error["message"] and "\n" not in error["message"]
    assert {c: len(backend.asked) for c, (_, backend) in upstreams.items()} == asked
    assert ask(url, "Q-agree", **{field: None}).status_code == 200  # not asked for: served as ever
