"""The gateway cases of docs/bad-input.md's table and how one runs: one request to the real app (FastAPI's test
client, no server) over a kNN router, with loopback upstreams that misbehave as the case says, recording the
status and the error message (for a stream that fails after it began, the 200 and the error event that ends
it). tests/test_bad_input_gateway.py runs each case; tests/test_bad_input_table.py regenerates the table.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field

API_KEY = "bad-input-key-0123456789"
UPSTREAM_URL = "http://127.0.0.1:8002/v1"  # how the table shows the hanging upstream's base_url
AUTH = {"Authorization": f"Bearer {API_KEY}"}
GOOD = {"model": "jouleroute-auto", "prompt": "what is 1 plus 2", "max_tokens": 4}
DEFAULT_BODY = {"max_body_bytes": 1_000_000}  # gateway.limits' default, for the cases larger than the table's 4096
MID_STREAM = "200, then an error event"  # a stream's status is sent with its first text; its error comes last


@dataclass(frozen=True)
class Request:
    what: str
    body: object = field(default_factory=lambda: GOOD)
    headers: dict = field(default_factory=lambda: AUTH)
    path: str = "/v1/completions"
    content: bytes | None = None
    limits: dict = field(default_factory=dict)  # this case's gateway.limits overrides
    tries: int = 1  # the last answer is recorded (a rate limit needs a few)
    # the upstreams: "silent" accepts connections and never answers, "refused" has nothing listening, "empty"
    # answers 200 with no text, "failing" answers 500; "cut" and "stall" stream two chunks of text, then drop the
    # connection ("cut") or say nothing more ("stall")
    upstream: str = "silent"
    busy: bool = False  # another request holds the gateway's one admission slot meanwhile (limits.max_pending: 1)


GATEWAY_CASES = [
    Request("no API key", headers={}),
    Request("a wrong API key", headers={"Authorization": "Bearer nope"}),
    Request("a body that is not JSON", body=None, content=b'{"model": "jouleroute-auto", "prompt": '),
    Request("a body that is not an object", body=["jouleroute-auto"]),
    Request("no `model`", body={"prompt": "hi"}),
    Request("a chat without `messages`", body={"model": "jouleroute-auto"}, path="/v1/chat/completions"),
    Request("a batch of prompts", body=GOOD | {"prompt": ["a", "b"]}),
    Request("`max_tokens` not a positive integer", body=GOOD | {"max_tokens": 0}),
    Request("`max_tokens` over the gateway's limit", body=GOOD | {"max_tokens": 100_000}),
    Request("`max_tokens` over the limit beside a `max_completion_tokens` within it (both are checked; the larger "
            "counts)", body=GOOD | {"max_completion_tokens": 4, "max_tokens": 100_000}),
    Request("`n` choices whose `max_tokens` add up over the gateway's limit", body=GOOD | {"n": 50, "max_tokens": 1000}),
    Request("`stop` neither a string nor a list of strings", body=GOOD | {"stop": 5}),
    Request("`temperature` outside 0 to 2", body=GOOD | {"temperature": 7}),
    Request("`stream` not a boolean", body=GOOD | {"stream": "yes"}),
    Request("`stream_options` not an object", body=GOOD | {"stream_options": True}),
    Request("`task` not a string", body=GOOD | {"task": 3}),
    Request("a task the router was not trained on", body=GOOD | {"task": "arithh"}),
    Request("an energy weight that is no number", body=GOOD | {"energy_weight": "lots"}),
    Request("an energy weight outside the trained range", headers=AUTH | {"X-Energy-Weight": "5"}),
    Request("two different energy weights", body=GOOD | {"energy_weight": 1}, headers=AUTH | {"X-Energy-Weight": "0"}),
    Request("an energy weight that is an integer too large for a float", body=GOOD | {"energy_weight": 10 ** 400}),
    Request("an integer past Python's 4,300 digits (at the default `limits.max_body_bytes`)", body=None,
            content=b'{"model": "jouleroute-auto", "prompt": "hi", "max_tokens": ' + b"9" * 5000 + b"}",
            limits=DEFAULT_BODY),
    Request("JSON nested 100,000 deep (at the default `limits.max_body_bytes`)", body=None,
            content=b'{"model": "jouleroute-auto", "prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            limits=DEFAULT_BODY),
    Request("an unpaired surrogate escape", body=None,
            content=b'{"model": "jouleroute-auto", "prompt": "\\ud800", "max_tokens": 4}'),
    Request("a prompt over `limits.max_prompt_tokens`", body=GOOD | {"prompt": "word " * 200}),
    Request("a body over `limits.max_body_bytes`", body=GOOD | {"prompt": "x" * 5000}),
    Request("a model not served here", body=GOOD | {"model": "gpt-9"}),
    Request("a key over its burst limit", limits={"burst": 1, "rate_per_minute": 1}, tries=2,
            body=GOOD | {"max_tokens": 0}),
    Request("an upstream that does not answer in time"),
    Request("an upstream that refuses the connection", upstream="refused"),
    Request("an upstream that fails (500)", upstream="failing"),
    Request("an upstream that answers with no text", upstream="empty"),
    Request("a stream whose upstream drops the connection after its first text", body=GOOD | {"stream": True},
            upstream="cut"),
    Request("a stream whose upstream falls silent after its first text, past its timeout",
            body=GOOD | {"stream": True}, upstream="stall"),
    Request("the gateway full (`limits.max_pending` requests already pending)", limits={"max_pending": 1}, busy=True),
]


class _Upstream:
    """A loopback upstream that misbehaves as ``mode`` says (see ``Request.upstream``)."""

    def __init__(self, mode: str) -> None:
        import threading
        import time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.sock, self.server = socket.socket(), None
        self.released = threading.Event()  # ends a "stall" upstream's silence when the case is over
        self.sock.bind(("127.0.0.1", 0))
        self.port = port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        if mode == "silent":
            self.sock.listen(64)
        elif mode == "refused":
            self.sock.close()
        elif mode in ("cut", "stall"):
            self.sock.close()
            released = self.released

            class Handler(BaseHTTPRequestHandler):
                protocol_version = "HTTP/1.1"  # a chunked body, so that a dropped connection is a cut-off stream

                def do_POST(self):  # noqa: N802 (http.server's name)
                    model = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))["model"]
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for word in ("Hello", " there"):
                        chunk = {"id": "c", "object": "text_completion", "created": 0, "model": model,
                                 "choices": [{"index": 0, "text": word, "logprobs": None, "finish_reason": None}]}
                        event = f"data: {json.dumps(chunk)}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                        time.sleep(0.1)  # each chunk read on its own: the stream has begun before it breaks
                    if mode == "stall":
                        released.wait(60)
                    self.close_connection = True  # no last chunk: the body ends unfinished

                def log_message(self, *args):
                    pass

            self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            threading.Thread(target=self.server.serve_forever, daemon=True).start()
        else:
            self.sock.close()
            status, body = (500, {"error": {"message": "out of memory"}}) if mode == "failing" else \
                (200, {"id": "x", "object": "text_completion", "model": "tiny", "choices": [
                    {"index": 0, "text": "", "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 0, "total_tokens": 5}})

            class Handler(BaseHTTPRequestHandler):
                def do_POST(self):  # noqa: N802 (http.server's name)
                    self.rfile.read(int(self.headers.get("content-length") or 0))
                    data = json.dumps(body).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

                def log_message(self, *args):
                    pass

            self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
            threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        self.sock.close()


def run_gateway_case(case: Request) -> tuple[str, str]:
    """(status, error message) of ``case`` sent to a gateway over a kNN router trained on task 'arith' (it picks
    `large` at the default weight) with two upstreams, `small` and `large`, that misbehave as the case says; most
    requests are refused before an upstream is asked. A stream that failed after it began is ``MID_STREAM``, with
    the message of the error event that ended it (after the text that came, and with no ``[DONE]``)."""
    import threading
    import time

    from fastapi.testclient import TestClient

    from jouleroute.gateway.app import create_app
    from jouleroute.gateway.auth import KeyStore, key_hash
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.energy import ExpectedEnergy
    from jouleroute.gateway.remote import RemoteUpstream
    from jouleroute.gateway.service import Gateway
    from tests.gateway.conftest import synthetic_profile

    silent = _Upstream(case.upstream)
    try:
        limits = {"max_prompt_tokens": 64, "max_body_bytes": 4096} | case.limits
        cfg = GatewayConfig.model_validate({"limits": limits})
        expected = ExpectedEnergy.from_profile(synthetic_profile()[0], prefill_weight=0.1)
        upstreams = {c: RemoteUpstream(c, silent.url, f"tiny-{c}", expected, timeout_s=2 if case.busy else 0.5,
                                       connect_timeout_s=0.5) for c in ("small", "large")}
        gateway = Gateway(cfg, _knn_router(), upstreams, KeyStore({key_hash(API_KEY)}))
        with TestClient(create_app(gateway)) as client:
            if case.busy:  # a first request waits on the silent upstream, holding the one admission slot
                holder = threading.Thread(target=client.post, args=("/v1/completions",),
                                          kwargs={"headers": AUTH, "json": GOOD})
                holder.start()
                deadline = time.monotonic() + 10
                while gateway.admission.pending == 0 and time.monotonic() < deadline:
                    time.sleep(0.01)
            for _ in range(case.tries):
                kwargs = {"content": case.content} if case.content is not None else {"json": case.body}
                response = client.post(case.path, headers=case.headers, **kwargs)
            if case.busy:
                holder.join()
        assert response.headers["x-request-id"], case
        if response.headers["content-type"].startswith("text/event-stream"):
            events = [json.loads(line[5:]) if line[5:].strip() != "[DONE]" else "[DONE]"
                      for line in response.text.splitlines() if line.startswith("data:")]
            assert response.status_code == 200 and "[DONE]" not in events, (case, events)
            # the first text at least (a cut connection may take the text still in transit with it)
            assert "".join(e["choices"][0]["text"] for e in events[:-1]) in ("Hello", "Hello there"), (case, events)
            assert events[-1]["error"]["code"] == "upstream_failed", (case, events)
            status, message = MID_STREAM, events[-1]["error"]["message"]
        else:
            status, message = str(response.status_code), response.json()["error"]["message"]
        # the upstream's address is the scratch port's: shown as a served upstream's would be
        message = message.replace(silent.url, UPSTREAM_URL)
        return status, message.replace(str(silent.port), UPSTREAM_URL.split(":")[-1].split("/")[0])
    finally:
        silent.close()


_ROUTER = []


def _knn_router():
    """The kNN router of tests/gateway/conftest.py (trained on task 'arith', λ in [0, 2]), built once."""
    if not _ROUTER:
        from jouleroute.energy.estimate import EstimateMeter
        from jouleroute.gateway.routers import ScoringGatewayRouter
        from jouleroute.routing.baselines.config import BaselinesConfig
        from jouleroute.routing.registry import build_router
        from tests.gateway.conftest import CANDIDATES, synthetic_profile

        profile, queries = synthetic_profile()
        cfg = BaselinesConfig(embedding={"model": "hashing", "cache_dir": None}, knn={"k": 8})
        router = build_router("knn", profile, queries, CANDIDATES, cfg, meter=EstimateMeter())
        _ROUTER.append(ScoringGatewayRouter(router, lambda_range=(0.0, 2.0), default_lam=0.0))
    return _ROUTER[0]
