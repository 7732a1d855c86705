"""An upstream that answers 200 with no text is never served as a 200 answer: the gateway answers 502
saying so (and how to get a fallback), or, with fallback on, the next-best candidate answers. Each
empty answer is counted in /metrics.

The empty answers are real: the tiny models' own greedy output, cut before its first visible
character by a stop string the client sends. That is what a base model's stop string does to it
when the model starts its answer with the stop (gemma3 on "... Answer:" stopping at once).
"""

from __future__ import annotations

import threading

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jouleroute.energy.estimate import EstimateMeter
from jouleroute.gateway.app import create_app
from jouleroute.gateway.auth import KeyStore, key_hash
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.service import Gateway
from jouleroute.gateway.upstreams import InProcessUpstream
from jouleroute.pool import CandidateSpec
from tests.gateway.conftest import API_KEY, LiveServer

AUTH = {"Authorization": f"Bearer {API_KEY}"}
PROMPT = "what is 3 plus 4"
SMALL = AUTH | {"X-Energy-Weight": "2"}  # at weight 2 the kNN router picks `small`


def _post(url, body, headers=AUTH):
    return httpx.post(url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 6} | body, headers=headers,
                      timeout=60)


def _stop_for_empty(url) -> str:
    """A stop string that empties `small`'s answer to PROMPT and leaves `large`'s with text."""
    texts = {c: _post(url, {"model": c}).json()["choices"][0]["text"] for c in ("small", "large")}
    assert texts["small"].strip(), texts  # preconditions of the construction, not of the gateway
    stop = texts["small"].lstrip()[0]
    assert texts["large"].split(stop)[0].strip(), texts
    return stop


def _empty_count(url, candidate) -> float:
    for family in text_string_to_metric_families(httpx.get(url + "/metrics").text):
        for s in family.samples:
            if s.name == "jouleroute_gateway_empty_answers_total" and s.labels["candidate"] == candidate:
                return s.value
    return 0.0


def _streamed(response) -> str:
    import json

    text = ""
    for line in response.text.splitlines():
        if line.startswith("data: {"):
            text += "".join(c.get("text", "") for c in json.loads(line[6:]).get("choices", []))
    return text


def _check_gateways(plain: str, falling: str) -> None:
    stop = _stop_for_empty(plain)
    empty = {"model": "jouleroute-auto", "stop": [stop]}

    refused = _post(plain, empty, SMALL)
    assert refused.status_code == 502, refused.text
    error = refused.json()["error"]
    assert error["code"] == "empty_answer"
    assert "'small'" in error["message"] and "no text" in error["message"]
    assert "gateway.fallback: true" in error["message"]
    streamed = _post(plain, empty | {"stream": True}, SMALL)
    assert streamed.status_code == 502, streamed.text  # held back until text arrives: never a 200 stream
    named = _post(falling, {"model": "small", "stop": [stop]})
    assert named.status_code == 502 and named.json()["error"]["code"] == "empty_answer"  # never swapped
    assert _empty_count(plain, "small") == 2

    rescued = _post(falling, empty, SMALL)
    assert rescued.status_code == 200, rescued.text
    assert rescued.headers["x-jouleroute-candidate"] == "large"
    assert rescued.headers["x-jouleroute-fallback-from"] == "small"
    assert rescued.json()["choices"][0]["text"].strip()
    rescued_stream = _post(falling, empty | {"stream": True}, SMALL)
    assert rescued_stream.status_code == 200 and rescued_stream.headers["x-jouleroute-candidate"] == "large"
    assert _streamed(rescued_stream).strip()
    assert _empty_count(falling, "small") == 3  # the named one, then one whole and one streamed


def test_an_empty_answer_from_a_server_is_never_a_200(make_gateway, upstream_urls):
    plain, _ = make_gateway(upstream_urls)
    falling, _ = make_gateway(upstream_urls, fallback=True)
    _check_gateways(plain, falling)


@pytest.fixture
def inprocess_gateways(knn_router, tiny_backends):
    """Gateways whose candidates generate in this process, as `jouleroute serve` does by default."""
    lock, meter = threading.Lock(), EstimateMeter()
    upstreams = {c: InProcessUpstream(CandidateSpec(candidate_id=c, model=c, prompt_style="fewshot",
                                                    answer_style="direct", max_new_tokens=6), backend, meter, lock)
                 for c, backend in zip(("small", "large"), tiny_backends)}
    servers = [LiveServer(create_app(Gateway(GatewayConfig(fallback=fallback), knn_router, upstreams,
                                             KeyStore({key_hash(API_KEY)}), lock)))
               for fallback in (False, True)]
    yield [s.start() for s in servers]
    for server in servers:
        server.stop()


def test_an_empty_answer_generated_in_process_is_never_a_200(inprocess_gateways):
    _check_gateways(*inprocess_gateways)


def test_a_question_that_ends_with_the_cue_gets_it_once(tiny_backends):
    """A chat rendered for a base model as `Question: ... Answer:` keeps one cue: after a doubled one gemma3
    began the next "Question:" at once, which its stop string cut to an empty answer."""
    import json

    from jouleroute.gateway.protocol import parse_request

    spec = CandidateSpec(candidate_id="base", model="m", prompt_style="fewshot", answer_style="direct",
                         max_new_tokens=6)
    upstream = InProcessUpstream(spec, tiny_backends[0], EstimateMeter(), threading.Lock())
    for question in ("Which is a primary color? A. green B. red. Answer:", "Which is a primary color?"):
        body = {"model": "base", "messages": [{"role": "user", "content": question}]}
        prompt = upstream.gen_request(parse_request(json.dumps(body).encode(), "chat")).prompt
        assert prompt.startswith("Question: Which") and prompt.endswith("\nAnswer:")
        assert prompt.count("Answer:") == 1, prompt
