"""A stream whose client leaves before the stream begins still releases what it holds: its admission count (one of
``limits.max_pending``) and its gateway, so a reload lets the swapped-out gateway go. The real app, driven as an ASGI
server drives it when the client has hung up: either its ``send`` raises OSError (ASGI spec 2.4's rule for a closed
connection), or it cancels the request (a server that cancels on disconnect). The upstream is real, on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from jouleroute.gateway.app import create_app
from jouleroute.gateway.auth import KeyStore, key_hash
from jouleroute.gateway.config import GatewayConfig
from jouleroute.gateway.reload import LiveGateway
from jouleroute.gateway.remote import RemoteUpstream
from jouleroute.gateway.service import Gateway
from tests.gateway.conftest import API_KEY, LiveServer
from tests.gateway.raw_upstream import raw_upstream


def _scope(raw: bytes) -> dict:
    return {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": "/v1/completions", "raw_path": b"/v1/completions",
            "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
            "headers": [(b"authorization", f"Bearer {API_KEY}".encode()), (b"content-type", b"application/json"),
                        (b"content-length", str(len(raw)).encode())]}


async def _ask_then_hang_up(app, how: str) -> None:
    """One streamed request whose client is gone when its response starts (``how``: ``send_fails`` or
    ``cancelled``)."""
    raw = json.dumps({"model": "small", "prompt": "what is 3 plus 4", "stream": True}).encode()
    body = [{"type": "http.request", "body": raw, "more_body": False}]

    async def receive() -> dict:
        return body.pop() if body else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if how == "send_fails":
            raise OSError("the client closed the connection")
        asyncio.current_task().cancel()  # the server saw the disconnect and cancels the request's task
        await asyncio.sleep(0)

    task = asyncio.ensure_future(app(_scope(raw), receive, send))
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await task


@pytest.mark.parametrize("how", ["send_fails", "cancelled"])
def test_a_stream_left_before_it_began_releases_its_admission_and_its_gateway(how, expected_energy):
    upstream = LiveServer(raw_upstream())
    url = upstream.start() + "/ok/v1"

    def gateway(upstreams, version: str) -> Gateway:
        gw = Gateway(GatewayConfig(), None, upstreams, KeyStore({key_hash(API_KEY)}))
        gw.version = version
        return gw

    old = gateway({"small": RemoteUpstream("small", url, "raw", expected_energy, timeout_s=20)}, "v1")
    live = LiveGateway(old, rebuild=lambda running: gateway(running.upstreams, "v2"))
    app = create_app(live)

    async def scenario() -> None:
        try:
            await _ask_then_hang_up(app, how)
            await asyncio.sleep(0.05)  # anything the response left to run on the loop
            await live.reload("test")
        finally:
            await live.aclose()

    try:
        asyncio.run(scenario())
    finally:
        upstream.stop()
    assert (old.admission.pending, old.in_flight) == (0, 0), "the request left is still counted"
    assert live._retired == [], "the swapped-out gateway is kept alive by a request that has left"
