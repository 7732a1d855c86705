"""Requests the schema-driven fuzz (benchmarks/bench_fuzz.py) or its probes found answered with a 500: each is the
client's fault, so a 400 that says what is wrong, and the gateway keeps serving. Also: the OpenAPI document the
fuzz reads describes the request bodies."""

from __future__ import annotations

import httpx
import pytest

from jouleroute.gateway.protocol import GatewayError, parse_request
from tests.gateway.conftest import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
GOOD = b'{"model": "jouleroute-auto", "prompt": "what is 1 plus 2", "max_tokens": 4}'

# raw body -> what the 400 says (each was a 500: AttributeError, OverflowError, ValueError, RecursionError,
# UnicodeEncodeError)
CASES = {
    "stream_options not an object": (b'{"model": "small", "prompt": "x", "stream_options": "yes"}',
                                     "'stream_options' must be an object"),
    "stream_options a list": (b'{"model": "small", "prompt": "x", "stream_options": [1]}',
                              "'stream_options' must be an object"),
    "energy_weight too large for a float": (b'{"model": "jouleroute-auto", "prompt": "x", "energy_weight": '
                                            + b"9" * 400 + b"}", "must be a finite number, got an integer of"),
    "an integer past Python's digit limit": (b'{"model": "small", "prompt": "x", "max_tokens": ' + b"9" * 5000
                                             + b"}", "an integer of 5000 digits; at most 4300 are read"),
    "nested too deeply": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    "unpaired surrogate in a prompt": (b'{"model": "jouleroute-auto", "prompt": "\\ud800 what"}',
                                       "unpaired surrogate (\\ud800)"),
    "unpaired surrogate in a chat": (b'{"model": "jouleroute-auto", "messages": [{"role": "user", '
                                     b'"content": "hi \\udc00"}]}', "unpaired surrogate (\\udc00)"),
}


@pytest.mark.parametrize("case", CASES)
def test_parse_request_refuses_with_a_400(case):
    raw, message = CASES[case]
    with pytest.raises(GatewayError) as caught:
        parse_request(raw, "chat" if b"messages" in raw else "completion")
    assert caught.value.status == 400 and message in caught.value.message


def test_a_paired_surrogate_escape_is_text():
    parsed = parse_request(b'{"model": "small", "prompt": "\\ud83d\\ude00 smile"}', "completion")
    assert parsed.route_text == "\U0001F600 smile"


@pytest.fixture
def roomy_gateway(make_gateway, upstream_urls):
    """The default body limit (1 MB): two of the cases are larger than the test gateway's 4 kB."""
    return make_gateway(upstream_urls, limits={"max_prompt_tokens": 64, "max_body_bytes": 1_000_000})[0]


@pytest.mark.parametrize("case", CASES)
def test_the_gateway_answers_400_and_keeps_serving(roomy_gateway, case):
    gateway_url = roomy_gateway
    raw, message = CASES[case]
    path = "/v1/chat/completions" if b"messages" in raw else "/v1/completions"
    response = httpx.post(gateway_url + path, content=raw, headers=AUTH, timeout=30)
    assert response.status_code == 400, response.text
    assert message in response.json()["error"]["message"]
    assert httpx.post(gateway_url + "/v1/completions", content=GOOD, headers=AUTH, timeout=30).status_code == 200


def test_the_openapi_document_describes_the_request_bodies(gateway_url):
    doc = httpx.get(gateway_url + "/openapi.json", timeout=30).json()
    for path, required in (("/v1/chat/completions", ["model", "messages"]), ("/v1/completions", ["model", "prompt"])):
        operation = doc["paths"][path]["post"]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        assert schema["required"] == required
        assert schema["properties"]["model"]["enum"] == ["jouleroute-auto", "small", "large"]
        assert schema["properties"]["energy_weight"]["maximum"] == 2.0  # the router's trained range
        assert {"400", "401", "404", "413", "429", "502", "503", "504"} <= set(operation["responses"])
        assert [p["name"] for p in operation["parameters"]] == ["X-Energy-Weight"]


def test_an_integral_float_is_an_integer_and_reaches_the_upstream_as_one():
    """JSON Schema counts 64.0 as an integer (the fuzz sends it where the schema says integer): accepted, and
    forwarded as 64."""
    parsed = parse_request(b'{"model": "small", "prompt": "x", "max_tokens": 64.0}', "completion")
    assert parsed.max_tokens == 64 and type(parsed.body["max_tokens"]) is int
    with pytest.raises(GatewayError, match="max_tokens must be a positive integer, got 2.5"):
        parse_request(b'{"model": "small", "prompt": "x", "max_tokens": 2.5}', "completion")


def test_max_tokens_cannot_slip_past_the_limit_beside_max_completion_tokens(roomy_gateway):
    """Both fields are forwarded, and an upstream may read either: each is checked, and the limit (the test
    gateway's 2048) applies to the larger. Before, max_completion_tokens alone was checked."""
    parsed = parse_request(b'{"model": "small", "prompt": "x", "max_completion_tokens": 4, "max_tokens": 99999}',
                           "completion")
    assert parsed.max_tokens == 4 and parsed.max_tokens_asked == 99999
    with pytest.raises(GatewayError, match="max_completion_tokens must be a positive integer"):
        parse_request(b'{"model": "small", "prompt": "x", "max_completion_tokens": "4", "max_tokens": 4}', "completion")
    response = httpx.post(roomy_gateway + "/v1/completions", headers=AUTH, timeout=30,
                          content=b'{"model": "small", "prompt": "x", "max_completion_tokens": 4, "max_tokens": 99999}')
    assert response.status_code == 400 and "max_output_tokens" in response.json()["error"]["message"]
    assert response.json()["error"]["message"].startswith("max_tokens=99999 exceeds")  # the field that is over
    larger = httpx.post(roomy_gateway + "/v1/completions", headers=AUTH, timeout=30,
                        content=b'{"model": "small", "prompt": "x", "max_completion_tokens": 99999, "max_tokens": 4}')
    assert larger.status_code == 400 and larger.json()["error"]["message"].startswith("max_completion_tokens=99999")


def test_the_openapi_document_names_the_known_tasks_and_the_token_limit(gateway_url):
    schema = httpx.get(gateway_url + "/openapi.json", timeout=30).json()["paths"]["/v1/completions"]["post"][
        "requestBody"]["content"]["application/json"]["schema"]
    assert schema["properties"]["task"]["enum"] == ["", "arith"]  # the kNN router of tests/gateway/conftest.py
    assert schema["properties"]["max_tokens"]["maximum"] == 2048  # gateway.limits.max_output_tokens, the default
