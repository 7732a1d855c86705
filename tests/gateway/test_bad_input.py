"""Bad requests get the right 4xx with a clear message, and the gateway keeps serving."""

from __future__ import annotations

import httpx
import pytest

from tests.gateway.conftest import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}"}
GOOD = {"model": "jouleroute-auto", "prompt": "what is 1 plus 2", "max_tokens": 4}


def _post(url, body=None, headers=AUTH, content=None, path="/v1/completions"):
    return httpx.post(url + path, json=body, content=content, headers=headers, timeout=30)


CASES = {
    "malformed json": (dict(content=b'{"model": "jouleroute-auto", "prompt": ', headers=AUTH | {
        "Content-Type": "application/json"}), 400, "not valid JSON"),
    "missing key": (dict(body=GOOD, headers={}), 401, "missing API key"),
    "wrong key": (dict(body=GOOD, headers={"Authorization": "Bearer nope"}), 401, "invalid API key"),
    "oversized prompt": (dict(body=GOOD | {"prompt": "word " * 200}), 400, "max_prompt_tokens"),
    "oversized body": (dict(body=GOOD | {"prompt": "x" * 5000}), 413, "max_body_bytes"),
    "unknown model": (dict(body=GOOD | {"model": "gpt-9"}), 404, "not served here"),
    "weight out of range": (dict(body=GOOD, headers=AUTH | {"X-Energy-Weight": "5"}), 400, "outside the router's"),
    "weight not a number": (dict(body=GOOD | {"energy_weight": "lots"}), 400, "must be a number"),
    "two different weights": (dict(body=GOOD | {"energy_weight": 1}, headers=AUTH | {"X-Energy-Weight": "0"}),
                              400, "two energy weights"),
    "no messages": (dict(body={"model": "small"}, path="/v1/chat/completions"), 400, "'messages'"),
    "max_tokens over the limit": (dict(body=GOOD | {"max_tokens": 100_000}), 400, "max_output_tokens"),
    # the router was trained on task 'arith' (tests/gateway/conftest.py): a typo is refused, naming the known ones
    "unknown task": (dict(body=GOOD | {"task": "arithh"}), 400, "unknown task 'arithh': the router (knn) knows ['arith']"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_request_gets_a_clear_4xx_and_the_gateway_keeps_serving(gateway_url, case):
    kwargs, status, message = CASES[case]
    response = _post(gateway_url, **kwargs)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert message in error["message"]
    assert response.headers["x-request-id"]
    assert _post(gateway_url, GOOD).status_code == 200


def test_a_known_task_or_none_is_routed(gateway_url):
    assert _post(gateway_url, GOOD | {"task": "arith"}).status_code == 200
    assert _post(gateway_url, GOOD | {"task": ""}).status_code == 200


def test_rate_limit_answers_429_naming_the_burst_with_retry_after(make_gateway, upstream_urls):
    url, _ = make_gateway(upstream_urls, limits={"rate_per_minute": 10, "burst": 2})  # one more every 6 s
    statuses = [_post(url, GOOD | {"model": "small"}).status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    limited = _post(url, GOOD)
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    message = limited.json()["error"]["message"]
    assert "burst limit of 2 requests" in message and "gateway.limits.burst" in message, message
    assert "rate limit of" not in message  # 4 requests are not more than the 10 a minute allowed
    metrics = httpx.get(url + "/metrics").text
    assert 'jouleroute_gateway_rate_limited_total{limit="burst"} 2.0' in metrics


def test_a_burst_of_100_from_one_key_passes_the_default_limits(make_gateway, upstream_urls):
    import asyncio

    url, _ = make_gateway(upstream_urls)  # the default rate limits (the fixture sets only body and prompt size)

    async def burst():
        async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=100)) as client:
            return await asyncio.gather(*(client.post(url + "/v1/completions", headers=AUTH,
                                                      json=GOOD | {"model": "small", "max_tokens": 2})
                                          for _ in range(100)))

    statuses = [r.status_code for r in asyncio.run(burst())]
    assert statuses.count(200) == 100, {s: statuses.count(s) for s in set(statuses)}


def test_an_unknown_path_or_method_is_answered_in_openai_s_error_shape(gateway_url):
    import httpx

    missing = httpx.post(gateway_url + "/v1/embeddings", json={"model": "small", "input": "hi"}, timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"  # was {"detail": ...}
    assert "POST /v1/embeddings: Not Found; the gateway answers POST /v1/chat/completions" in \
        missing.json()["error"]["message"]
    wrong = httpx.get(gateway_url + "/v1/completions", timeout=10)
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"
    assert "POST" in wrong.headers["allow"]


def test_feedback_is_held_to_the_same_per_key_limits(make_gateway, upstream_urls):
    # every accepted score is written to disk: without a limit one key could fill it
    url, _ = make_gateway(upstream_urls, limits={"rate_per_minute": 10, "burst": 2})
    statuses = [httpx.post(url + "/v1/feedback", headers=AUTH, json={"request_id": "x", "score": 1}, timeout=10)
                .status_code for _ in range(3)]
    assert statuses == [404, 404, 429]  # no capture here: an unknown id twice, then the burst limit
