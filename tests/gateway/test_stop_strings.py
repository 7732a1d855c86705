"""An empty stop string stops nothing, and upstreams disagree on it: jouleroute's own OpenAI-compatible server
(jouleroute/backends/serve.py) refuses one, the in-process path ignores it. The gateway drops empty stop strings
when it reads the request (protocol.py), so every upstream kind gets the same request: a ``stop`` list keeps its
other strings, and with none left no ``stop`` is sent."""

from __future__ import annotations

import json

import httpx
import pytest

from jouleroute.backends.serve import create_app as create_upstream_app
from jouleroute.gateway.app import create_app
from jouleroute.gateway.auth import KeyStore, key_hash
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.protocol import parse_request
from jouleroute.gateway.remote import RemoteUpstream
from jouleroute.gateway.service import Gateway
from tests.gateway.conftest import API_KEY, LiveServer
from tests.gateway.scripted import ScriptedBackend

AUTH = {"Authorization": f"Bearer {API_KEY}"}


class StopRecorder(ScriptedBackend):
    """A scripted backend that keeps the stop strings of every request it generates for."""

    def __init__(self) -> None:
        super().__init__("model-s", {}, default="The answer is 3.")
        self.stops: list[list[str]] = []

    def generate(self, requests):
        self.stops += [list(r.stop) for r in requests]
        return super().generate(requests)


@pytest.fixture(scope="module")
def upstream():
    """(the /v1 root of jouleroute's own server over a ``StopRecorder``, the recorder)."""
    backend = StopRecorder()
    server = LiveServer(create_upstream_app(backend, "model-s"))
    url = server.start() + "/v1"
    yield url, backend
    server.stop()


@pytest.fixture(scope="module")
def gateway_url(upstream, expected_energy):
    """A gateway with no router, its one candidate ``s`` the upstream above."""
    upstreams = {"s": RemoteUpstream("s", upstream[0], "model-s", expected_energy, timeout_s=20)}
    gateway = Gateway(GatewayConfig.model_validate({}), None, upstreams, KeyStore({key_hash(API_KEY)}))
    server = LiveServer(create_app(gateway))
    yield server.start()
    server.stop()


def test_the_upstream_itself_refuses_an_empty_stop_string(upstream):
    """Why the gateway drops them: sent as they came, these would be refused, not answered."""
    response = httpx.post(upstream[0] + "/completions", json={"model": "model-s", "prompt": "1 plus 2", "stop": ""},
                          timeout=30)
    assert 400 <= response.status_code < 500


@pytest.mark.parametrize("stop, sent", [("", None), ([""], None), (["", ""], None), (["", "\n"], ["\n"]),
                                        (["\n", "", "Q:"], ["\n", "Q:"]), ("\n", "\n"), (["\n"], ["\n"])])
def test_parse_request_drops_empty_stop_strings(stop, sent):
    for kind, field in (("completion", '"prompt": "x"'), ("chat", '"messages": [{"role": "user", "content": "x"}]')):
        raw = ('{"model": "s", ' + field + ', "stop": ' + json.dumps(stop) + "}").encode()
        body = parse_request(raw, kind).body
        assert body.get("stop", None) == sent and ("stop" in body) == (sent is not None)


@pytest.mark.parametrize("path, body", [
    ("/v1/completions", {"prompt": "what is 1 plus 2"}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "what is 1 plus 2"}]}),
])
@pytest.mark.parametrize("stream", [False, True])
def test_an_empty_stop_string_reaches_no_upstream(gateway_url, upstream, path, body, stream):
    backend = upstream[1]
    for stop, seen in (("", []), ([""], []), (["", "\n"], ["\n"])):
        del backend.stops[:]
        response = httpx.post(gateway_url + path, headers=AUTH, timeout=30,
                              json={"model": "s", "max_tokens": 8, "stop": stop, "stream": stream} | body)
        assert response.status_code == 200, response.text
        assert "The answer is 3." in response.text
        assert backend.stops == [seen], (stop, backend.stops)
