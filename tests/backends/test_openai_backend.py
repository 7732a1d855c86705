"""The OpenAI-compatible client against a real HTTP server on loopback.

The server is ``jouleroute.backends.serve`` run by uvicorn in a thread, backed by the
tiny model; the client's answers must equal the in-process backend's.
"""

from __future__ import annotations

import socket

import pytest

from jouleroute.backends import Backend, BackendConfig, GenRequest, GenResult, make_backend
from jouleroute.backends.openai_backend import BackendRequestError, OpenAIBackend
from jouleroute.backends.serve import ServerThread, create_app
from jouleroute.pool import ModelSpec

REQUESTS = [
    GenRequest(prompt="The quick brown fox", max_new_tokens=9),
    GenRequest(messages=[{"role": "user", "content": "What is 12 plus 30?"}], max_new_tokens=6),
    GenRequest(prompt="Energy is", max_new_tokens=5, stop=["e"]),
]


class FailingFirst(Backend):
    """Wraps a backend and fails its first ``n`` calls, the way an overloaded server does."""

    name = "failing-first"

    def __init__(self, inner: Backend, n: int) -> None:
        self.inner, self.left, self.model_id = inner, n, inner.model_id

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        if self.left > 0:
            self.left -= 1
            raise RuntimeError("simulated overload")
        return self.inner.generate(requests)


@pytest.fixture(scope="module")
def server_url(tiny_backend):
    with ServerThread(create_app(tiny_backend, "tiny")) as url:
        yield url


def _key(r: GenResult) -> tuple:
    return (r.text, r.input_tokens, r.output_tokens, r.finish_reason)


@pytest.mark.parametrize("stream", [True, False])
def test_http_answers_equal_in_process_answers(server_url, tiny_backend, stream):
    expected = [tiny_backend.generate([r])[0] for r in REQUESTS]
    client = OpenAIBackend(server_url, "tiny", concurrency=3, stream=stream)
    got = client.generate(REQUESTS)
    client.close()
    assert [_key(r) for r in got] == [_key(r) for r in expected]
    assert all(r.latency_s > 0 for r in got)
    assert all((r.ttft_s is not None) == stream for r in got)


def test_make_backend_builds_the_http_client(server_url, tiny_backend, tmp_path):
    cfg = BackendConfig(kind="openai", base_url=server_url, concurrency=2, stream=False)
    backend = make_backend(cfg, "remote", ModelSpec(source="served", served_name="tiny"), tmp_path)
    assert backend.name == "openai" and backend.model_id == "tiny"
    assert _key(backend.generate(REQUESTS[:1])[0]) == _key(tiny_backend.generate(REQUESTS[:1])[0])


def test_unknown_model_is_a_4xx_error_without_retries(server_url):
    client = OpenAIBackend(server_url, "no-such-model", max_retries=3, backoff_s=5.0)
    with pytest.raises(BackendRequestError, match="404.*no-such-model"):
        client.generate(REQUESTS[:1])  # a retry would sleep 5 s; pytest-timeout is not needed to notice


def test_server_errors_are_retried(tiny_backend):
    with ServerThread(create_app(FailingFirst(tiny_backend, 2), "tiny")) as url:
        client = OpenAIBackend(url, "tiny", max_retries=2, backoff_s=0.01, stream=False)
        assert _key(client.generate(REQUESTS[:1])[0]) == _key(tiny_backend.generate(REQUESTS[:1])[0])
    with ServerThread(create_app(FailingFirst(tiny_backend, 5), "tiny")) as url:
        client = OpenAIBackend(url, "tiny", max_retries=1, backoff_s=0.01, stream=False)
        with pytest.raises(BackendRequestError, match="after 2 attempts.*500"):
            client.generate(REQUESTS[:1])


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAIBackend(f"http://127.0.0.1:{port}/v1", "tiny", max_retries=1, backoff_s=0.01)
    with pytest.raises(BackendRequestError, match="after 2 attempts"):
        client.generate(REQUESTS[:1])


def test_missing_api_key_env_is_named(monkeypatch):
    monkeypatch.delenv("JOULEROUTE_TEST_KEY", raising=False)
    with pytest.raises(BackendRequestError, match="JOULEROUTE_TEST_KEY"):
        OpenAIBackend("http://127.0.0.1:1/v1", "tiny", api_key_env="JOULEROUTE_TEST_KEY")
