"""An upstream that fails after its stream has begun: the client's stream ends with an error event naming the
upstream and what happened (cut, or silent past its timeout), never with a truncated stream or a hang; and the
gateway serves the next request. (The measured version, 200 requests in flight while a real upstream process is
killed or frozen: benchmarks/bench_faults.py.)"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from jouleroute.gateway.app import create_app
from jouleroute.gateway.auth import KeyStore, key_hash
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.remote import RemoteUpstream
from jouleroute.gateway.service import Gateway
from tests.gateway.conftest import API_KEY, LiveServer

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def failing_upstream(how: str) -> FastAPI:
    """Streams two chunks of text, then either drops the connection (``cut``) or says nothing more (``stall``)."""
    app = FastAPI()

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()

        async def events():
            for word in ("Hello", " there"):
                chunk = {"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
                         "choices": [{"index": 0, "text": word, "logprobs": None, "finish_reason": None}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            if how == "cut":
                raise RuntimeError("the upstream process died")  # the server aborts the connection mid-body
            await asyncio.sleep(3600)

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": "broken"}]}

    return app


@pytest.fixture
def served(expected_energy, upstream_urls):
    """(how) -> the gateway's URL, its candidate ``broken`` in front of a failing upstream (timeout 1 s), and
    ``large`` in front of a working one."""
    started: list[LiveServer] = []

    def make(how: str) -> str:
        upstream = LiveServer(failing_upstream(how))
        started.append(upstream)
        upstreams = {"broken": RemoteUpstream("broken", upstream.start() + "/v1", "broken", expected_energy,
                                              timeout_s=1.0),
                     "large": RemoteUpstream("large", upstream_urls["large"], "tiny-large", expected_energy)}
        gateway = Gateway(GatewayConfig.model_validate({}), None, upstreams, KeyStore({key_hash(API_KEY)}))
        server = LiveServer(create_app(gateway))
        started.append(server)
        return server.start()

    yield make
    for server in started:
        server.stop()


def read_stream(url: str, model: str) -> tuple[int, list]:
    events = []
    with httpx.stream("POST", url + "/v1/completions", headers=AUTH, timeout=60,
                      json={"model": model, "prompt": "say hello", "max_tokens": 4, "stream": True}) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                payload = line[5:].strip()
                events.append(payload if payload == "[DONE]" else json.loads(payload))
        return response.status_code, events


@pytest.mark.parametrize("how, said", [("cut", "failed mid-stream"), ("stall", "timed out mid-stream")])
def test_a_stream_that_fails_midway_ends_with_an_error_event_naming_the_upstream(served, how, said):
    url = served(how)
    status, events = read_stream(url, "broken")
    assert status == 200  # the headers went out with the first text
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == "Hello there"
    error = events[-1]["error"]
    assert error["message"].startswith("upstream 'broken' at http://127.0.0.1:") and said in error["message"]
    assert error["code"] == "upstream_failed" and "[DONE]" not in events
    status, events = read_stream(url, "large")  # the gateway goes on serving
    assert status == 200 and events[-1] == "[DONE]"
