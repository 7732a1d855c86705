"""Upstream replies the gateway cannot serve as they came: a malformed reply (a body that is not a JSON object, null
token counts, a stream line that is not JSON) and an upstream's own 401/403/429 are the upstream's failure, a 502
naming it (or the fallback's answer; mid-stream, the stream's error event), never a bare 500 or the client's 4xx.
Also: /readyz of a busy gateway, and a stream of n > 1 choices. Real loopback servers
(tests/gateway/raw_upstream.py)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from jouleroute.cascade.chain import Chain
from jouleroute.gateway.app import create_app
from jouleroute.gateway.cascade import CascadeGateway
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.energy import Expected, ExpectedEnergy
from jouleroute.gateway.remote import RemoteUpstream
from jouleroute.gateway.service import Gateway
from tests.gateway.conftest import API_KEY, LiveServer
from tests.gateway.raw_upstream import raw_upstream

AUTH = {"Authorization": f"Bearer {API_KEY}"}
PROMPT = "what is 3 plus 4"


@pytest.fixture(scope="module")
def raw_url():
    server = LiveServer(raw_upstream())
    yield server.start()
    server.stop()


def _ask(url: str, model: str, stream: bool = False, **extra) -> httpx.Response:
    return httpx.post(url + "/v1/completions", headers=AUTH | {"X-Energy-Weight": "0"}, timeout=30,
                      json={"model": model, "prompt": PROMPT, "max_tokens": 4, "stream": stream} | extra)


def _events(response: httpx.Response) -> list:
    payloads = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return [p if p == "[DONE]" else json.loads(p) for p in payloads]


@pytest.mark.parametrize("how, stream, said", [("listbody", False, "answered with a JSON list, not an object"),
                                               ("nullusage", False, "without `usage` token counts"),
                                               ("garbage", True, "a stream line that is not JSON"),
                                               ("status401", False, "answered 401"),
                                               ("status403", True, "answered 403"),
                                               ("status429", False, "answered 429")])
def test_a_malformed_or_refused_reply_is_a_502_naming_the_upstream_and_falls_back(make_gateway, upstream_urls,
                                                                                 raw_url, how, stream, said):
    bad = f"{raw_url}/{how}/v1"
    urls = {"small": upstream_urls["small"], "large": bad}  # at energy weight 0 the router picks large first
    plain, _ = make_gateway(urls)
    failed = _ask(plain, "large", stream)
    assert failed.status_code == 502 and failed.headers["content-type"] == "application/json"
    assert failed.headers["x-request-id"]
    error = failed.json()["error"]
    assert error["message"].startswith(f"upstream 'large' at {bad}: ") and said in error["message"], error
    assert error["type"] == "upstream_error"
    falling, _ = make_gateway(urls, fallback=True)
    rescued = _ask(falling, "jouleroute-auto", stream)
    assert rescued.status_code == 200, rescued.text
    assert rescued.headers["x-jouleroute-candidate"] == "small"
    assert rescued.headers["x-jouleroute-fallback-from"] == "large"


@pytest.mark.parametrize("how, said", [("midjunk", "failed mid-stream: a stream line that is not JSON"),
                                       ("nullusage", "answered without `usage` token counts")])
def test_a_malformed_stream_after_its_first_text_ends_with_an_error_event(make_gateway, upstream_urls, raw_url,
                                                                         how, said):
    url, _ = make_gateway({"small": upstream_urls["small"], "large": f"{raw_url}/{how}/v1"})
    response = _ask(url, "large", stream=True)
    assert response.status_code == 200  # the headers went out with the first text
    events = _events(response)
    assert events[0]["choices"][0]["text"] == "answer 0" and "[DONE]" not in events
    error = events[-1]["error"]
    assert error["code"] == "upstream_failed" and said in error["message"] and "'large'" in error["message"]
    counted = [line for line in httpx.get(url + "/metrics").text.splitlines()
               if line.startswith("jouleroute_gateway_requests_total{")]
    assert any('status="502"' in line for line in counted) and not any('status="499"' in line for line in counted)


def test_an_upstream_rejecting_the_request_itself_is_still_the_clients_4xx(make_gateway, upstream_urls, raw_url):
    url, _ = make_gateway({"small": upstream_urls["small"], "large": f"{raw_url}/status400/v1"}, fallback=True)
    response = _ask(url, "large")
    assert response.status_code == 400 and "rejected the request" in response.json()["error"]["message"]


def test_a_cascade_whose_upstreams_refuse_it_is_the_documented_502_with_the_cascade_headers(raw_url):
    expected = ExpectedEnergy({c: Expected(0.1, "estimated") for c in "ab"}, 0.1)
    upstreams = {"a": RemoteUpstream("a", f"{raw_url}/status401/v1", "a", expected),
                 "b": RemoteUpstream("b", f"{raw_url}/status429/v1", "b", expected)}
    cfg = GatewayConfig.model_validate({"router": {"kind": "cascade", "chain": "chain.json"}})
    server = LiveServer(create_app(CascadeGateway(cfg, Chain((("a",), ("b",))), upstreams)))
    try:
        response = httpx.post(server.start() + "/v1/chat/completions", timeout=30, json={
            "model": "jouleroute-auto", "messages": [{"role": "user", "content": PROMPT}]})
    finally:
        server.stop()
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "cascade_failed" and "answered 429" in error["message"]
    assert response.headers["x-jouleroute-cascade"] == "stage1=a;stage2=b"
    assert response.headers["x-jouleroute-cascade-reasons"] == "no_answer,last_stage"


def test_readyz_of_a_busy_gateway_is_ready(knn_router, expected_energy, raw_url):
    """Every connection of the answers' pool (``concurrency``) busy with a slow answer: the probe has its own."""
    upstreams = {c: RemoteUpstream(c, f"{raw_url}/slow/v1", f"tiny-{c}", expected_energy, concurrency=2)
                 for c in ("small", "large")}
    server = LiveServer(create_app(Gateway(GatewayConfig(), knn_router, upstreams)))
    url = server.start()
    statuses: list[int] = []
    slow = [threading.Thread(target=lambda: statuses.append(_ask(url, "large").status_code)) for _ in range(2)]
    try:
        for thread in slow:
            thread.start()
        time.sleep(0.7)  # both answers in flight: the answers' pool is full for another 2 s
        ready = httpx.get(url + "/readyz", timeout=10)
        for thread in slow:
            thread.join(30)
    finally:
        server.stop()
    assert statuses == [200, 200]
    assert ready.status_code == 200, ready.json()


@pytest.mark.parametrize("include_usage", [False, True])
def test_a_stream_of_two_choices_finishes_each(make_gateway, upstream_urls, raw_url, include_usage):
    url, _ = make_gateway({"small": upstream_urls["small"], "large": f"{raw_url}/ok/v1"})
    extra = {"stream_options": {"include_usage": True}} if include_usage else {}
    response = _ask(url, "large", stream=True, n=2, **extra)
    assert response.status_code == 200
    events = _events(response)
    finished = {c["index"]: c["finish_reason"] for e in events[:-1] for c in e["choices"] if c.get("finish_reason")}
    assert finished == {0: "stop", 1: "stop"}
    assert events[-1] == "[DONE]" and events[-2]["usage"]["jouleroute"]["candidate"] == "large"
