"""Hot reload under concurrent requests (issue 49): the champion record changes, the file watch swaps the gateway,
no request fails or hangs, every response names the old or the new policy version, and requests after the swap are
answered by the new one. Real loopback upstreams; the rebuild reuses them as `jouleroute serve`'s does."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx

from jouleroute.gateway.app import create_app
from jouleroute.gateway.auth import KeyStore, key_hash
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.reload import LiveGateway
from jouleroute.gateway.remote import RemoteUpstream
from jouleroute.gateway.service import Gateway
from tests.gateway.conftest import API_KEY, LiveServer

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _gateway(router, urls, expected, version: str, upstreams=None) -> Gateway:
    upstreams = upstreams or {c: RemoteUpstream(c, u, f"tiny-{c}", expected, timeout_s=20) for c, u in urls.items()}
    gw = Gateway(GatewayConfig(), router, upstreams, KeyStore({key_hash(API_KEY)}))
    gw.version = version
    return gw


def test_a_reload_under_concurrent_requests_fails_none_and_each_names_its_version(knn_router, upstream_urls,
                                                                                expected_energy, tmp_path):
    record = tmp_path / "champion.json"
    record.write_text('{"version": 1}')
    old = _gateway(knn_router, upstream_urls, expected_energy, "route:old")
    live = LiveGateway(old, rebuild=lambda running: _gateway(knn_router, None, expected_energy, "route:new",
                                                              running.upstreams),
                       watch=record, poll_s=0.05)
    server = LiveServer(create_app(live))
    url = server.start()
    results: list[tuple[int, str, float]] = []  # status, version, when the request was sent
    stop = threading.Event()

    def traffic() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                at = time.monotonic()
                r = client.post(url + "/v1/completions", headers=AUTH, json={
                    "model": "jouleroute-auto", "prompt": "what is 3 plus 4", "max_tokens": 2})
                results.append((r.status_code, r.headers.get("x-jouleroute-policy-version", ""), at))

    workers = [threading.Thread(target=traffic) for _ in range(6)]
    try:
        for w in workers:
            w.start()
        deadline = time.monotonic() + 30
        while sum(v == "route:old" for _, v, _ in results) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        record.write_text('{"version": 2}')  # what the loop's promotion does: a new deployed record
        while not live.reloads and time.monotonic() < deadline:
            time.sleep(0.01)
        swapped = len(results)
        while len(results) < swapped + 20 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        for w in workers:
            w.join(60)
        hung = [w for w in workers if w.is_alive()]
        server.stop()
    assert not hung, "a request hung across the reload"
    assert live.reloads == [{"why": "file watch", "from": "route:old", "to": "route:new", "error": None}]
    assert all(status == 200 for status, _, _ in results), [r for r in results if r[0] != 200][:5]
    assert {v for _, v, _ in results} == {"route:old", "route:new"}
    after = [v for _, v, at in results if at > live.swapped_at]
    assert after and set(after) == {"route:new"}  # a request sent after the swap is answered by the new policy


def test_a_rebuild_that_fails_keeps_serving_the_old_policy(knn_router, upstream_urls, expected_energy):
    old = _gateway(knn_router, upstream_urls, expected_energy, "route:old")

    def broken(running):
        raise ValueError("champion.json: 'deployed' names no policy kind")

    live = LiveGateway(old, rebuild=broken)
    outcome = asyncio.run(live.reload("SIGHUP"))
    assert live.current is old and outcome["to"] is None and "names no policy kind" in outcome["error"]


def test_a_retired_gateway_is_let_go_once_its_requests_are_done(knn_router, upstream_urls, expected_energy):
    """A reload keeps the swapped-out gateway while a request started on it is in flight (that request still gets
    its 200 from it), then lets it go: its routing worker and drift thread stop, and reloads pile up nothing."""
    from jouleroute.gateway.drift import DriftConfig, DriftMonitor
    from jouleroute.routing.baselines.embeddings import HashingEmbedder
    from tests.gateway.raw_upstream import raw_upstream

    slow = LiveServer(raw_upstream())
    slow_url = slow.start() + "/slow/v1"
    upstreams = {"small": RemoteUpstream("small", upstream_urls["small"], "tiny-small", expected_energy),
                 "large": RemoteUpstream("large", slow_url, "tiny-large", expected_energy)}
    old = _gateway(knn_router, None, expected_energy, "route:old", upstreams)
    old.drift = DriftMonitor(HashingEmbedder(), ["what is 1 plus 2", "name a red fruit"], ["a", "b"], DriftConfig())
    live = LiveGateway(old, rebuild=lambda running: _gateway(knn_router, None, expected_energy, "route:new",
                                                              running.upstreams))
    server = LiveServer(create_app(live))
    url = server.start()
    answers: list[httpx.Response] = []

    def ask(model: str, weight: str = "2") -> httpx.Response:
        return httpx.post(url + "/v1/completions", headers=AUTH | {"X-Energy-Weight": weight}, timeout=30,
                          json={"model": model, "prompt": "what is 3 plus 4", "max_tokens": 2})

    try:
        assert ask("jouleroute-auto").status_code == 200  # the old gateway's routing worker runs
        worker = old.batcher.worker
        in_flight = threading.Thread(target=lambda: answers.append(ask("large")))  # answered after 3 s
        in_flight.start()
        deadline = time.monotonic() + 10
        while old.in_flight == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        asyncio.run_coroutine_threadsafe(live.reload("SIGHUP"), live.loop).result(30)
        assert live._retired == [old] and not worker.done()  # a request still runs on it
        in_flight.join(30)
        deadline = time.monotonic() + 10  # the worker's cancellation completes on the loop's next turn
        while (live._retired or not worker.done()) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert live._retired == [] and worker.done()
        old.drift._thread.join(5)
        assert not old.drift._thread.is_alive()
        new = live.current
        asyncio.run_coroutine_threadsafe(live.reload("SIGHUP"), live.loop).result(30)  # nothing in flight
        assert live._retired == [] and live.current is not new
        assert ask("jouleroute-auto").status_code == 200
    finally:
        server.stop()
        slow.stop()
    assert [(r.status_code, r.headers["x-jouleroute-policy-version"]) for r in answers] == [(200, "route:old")]


def test_openapi_describes_the_gateway_serving_after_a_reload(knn_router, upstream_urls, expected_energy):
    """``/openapi.json`` is built for the gateway serving: after a reload to a policy that serves only ``small``
    with no router, it lists only ``small`` and no energy-weight range (it was built once, and stale)."""
    old = _gateway(knn_router, upstream_urls, expected_energy, "route:old")
    live = LiveGateway(old, rebuild=lambda running: _gateway(None, None, expected_energy, "model:small",
                                                              {"small": running.upstreams["small"]}))
    server = LiveServer(create_app(live))
    url = server.start()

    def described() -> tuple[list[str], dict]:
        document = httpx.get(url + "/openapi.json", timeout=30).json()
        body = document["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]["application/json"]
        fields = body["schema"]["properties"]
        return fields["model"]["enum"], {k: v for k, v in fields["energy_weight"].items() if k != "description"}

    try:
        routed = (["jouleroute-auto", "small", "large"], {"type": "number", "minimum": 0.0, "maximum": 2.0})
        assert described() == routed
        asyncio.run_coroutine_threadsafe(live.reload("SIGHUP"), live.loop).result(30)
        assert described() == (["small"], {"type": "number"})
    finally:
        server.stop()

