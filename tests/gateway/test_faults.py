"""An upstream dies mid-test: its requests get 502 naming it (or fall back when configured); the other serves."""

from __future__ import annotations

import httpx

from jouleroute.backends.serve import create_app as create_upstream_app
from tests.gateway.conftest import API_KEY, LiveServer

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _ask(url, model, weight=None):
    headers = AUTH | ({"X-Energy-Weight": str(weight)} if weight is not None else {})
    return httpx.post(url + "/v1/completions", headers=headers, timeout=30,
                      json={"model": model, "prompt": "what is 3 plus 4", "max_tokens": 4})


def test_killed_upstream_gives_502_or_falls_back(make_gateway, upstream_urls, tiny_backends):
    doomed = LiveServer(create_upstream_app(tiny_backends[0], "tiny-small"))
    doomed_url = doomed.start() + "/v1"
    urls = {"small": doomed_url, "large": upstream_urls["large"]}
    plain, _ = make_gateway(urls)
    falling, _ = make_gateway(urls, fallback=True)
    assert _ask(plain, "small").status_code == 200
    assert _ask(falling, "jouleroute-auto", weight=2).headers["x-jouleroute-candidate"] == "small"

    doomed.stop()

    failed = _ask(plain, "small")
    assert failed.status_code == 502
    assert "'small'" in failed.json()["error"]["message"] and doomed_url in failed.json()["error"]["message"]
    routed = _ask(plain, "jouleroute-auto", weight=2)  # the router still picks small: no fallback, 502
    assert routed.status_code == 502 and routed.headers["x-jouleroute-candidate"] == "small"
    assert _ask(plain, "large").status_code == 200  # the other upstream keeps serving

    rescued = _ask(falling, "jouleroute-auto", weight=2)
    assert rescued.status_code == 200
    assert rescued.headers["x-jouleroute-candidate"] == "large"
    assert rescued.headers["x-jouleroute-fallback-from"] == "small"
    assert rescued.json()["usage"]["jouleroute"]["fallback_from"] == ["small"]
    assert _ask(falling, "small").status_code == 502  # a named candidate is never swapped for another

    ready = httpx.get(plain + "/readyz")
    assert ready.status_code == 503 and "'small'" in ready.json()["problems"][0]
