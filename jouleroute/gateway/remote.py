"""An upstream OpenAI-compatible server (``vllm serve``, jouleroute's own server, another gateway).

The client is aiohttp: under load the gateway's own CPU per request is what it adds to every
answer's latency, and aiohttp spends a fraction of what httpx does per call. Idle connections
are dropped after 2 s, before a server's usual 5 s keep-alive ends, so the gateway never sends
a request down a connection the server is closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import AsyncIterator

import aiohttp

from jouleroute.gateway.energy import ExpectedEnergy
from jouleroute.gateway.measured import ExporterTracker, MeasuredEnergy
from jouleroute.gateway.protocol import ParsedRequest
from jouleroute.gateway.upstreams import Answer, Stream, Upstream, UpstreamError


class RemoteUpstream(Upstream):
    """Energy is measured on the upstream's GPU node when its exporter is named (``measured-*``,
    gateway/measured.py), else the profile's expectation for the answer's token counts (``expected:<source>``)."""

    def __init__(self, candidate_id: str, base_url: str, served_name: str, expected: ExpectedEnergy,
                 timeout_s: float = 120.0, connect_timeout_s: float = 5.0, concurrency: int = 32,
                 api_key_env: str | None = None, measured: MeasuredEnergy | None = None,
                 tracker: ExporterTracker | None = None) -> None:
        self.candidate_id, self.served_name, self.expected = candidate_id, served_name, expected
        self.measured, self.tracker = measured, tracker
        self.base_url = base_url.rstrip("/")
        self.where = f"'{candidate_id}' at {base_url}"
        self.headers = {}
        if api_key_env:
            if not os.environ.get(api_key_env):
                raise ValueError(f"gateway.upstreams.{candidate_id}.api_key_env names ${api_key_env}, which is not set")
            self.headers["Authorization"] = f"Bearer {os.environ[api_key_env]}"
        self.timeout = aiohttp.ClientTimeout(total=timeout_s, connect=connect_timeout_s)
        self.concurrency = concurrency
        self.session: aiohttp.ClientSession | None = None

    def _session(self) -> aiohttp.ClientSession:
        # created on first use: a session belongs to the event loop that serves the gateway
        if self.session is None or self.session.closed:
            connector = aiohttp.TCPConnector(limit=self.concurrency, keepalive_timeout=2.0)
            self.session = aiohttp.ClientSession(connector=connector, timeout=self.timeout, headers=self.headers)
        return self.session

    def _url_and_body(self, request: ParsedRequest, stream: bool) -> tuple[str, dict]:
        body = request.body | {"model": self.served_name, "stream": stream}
        body.pop("stream_options", None)
        if stream:  # the gateway needs the token counts to state the energy
            body["stream_options"] = {"include_usage": True}
        path = "/chat/completions" if request.kind == "chat" else "/completions"
        return self.base_url + path, body

    def _error(self, error: Exception, mid_stream: bool = False) -> UpstreamError:
        """A transport failure as the gateway's 502/504. ``mid_stream``: the stream had opened (a 200 and its
        headers), so the upstream was reached and then went away or fell silent."""
        if isinstance(error, asyncio.TimeoutError):
            return UpstreamError(self.where, 504, "timed out" + (" mid-stream" if mid_stream else ""))
        what = "failed mid-stream" if mid_stream else "unreachable"
        return UpstreamError(self.where, 502, f"{what} ({type(error).__name__}: {error})")

    def _answer(self, body: dict | None, usage: dict | None) -> Answer:
        if not usage or "prompt_tokens" not in usage or "completion_tokens" not in usage:
            raise UpstreamError(self.where, 502, "answered without `usage` token counts")
        prompt, completion = int(usage["prompt_tokens"]), int(usage["completion_tokens"])
        energy, source = self.expected.estimate(self.candidate_id, prompt, completion)
        if self.tracker is not None:
            measured = self.tracker.finish(self.candidate_id, prompt, completion, energy)
            if measured is not None:
                energy, source = measured
        return Answer(body, prompt, completion, energy, source)

    def _begin(self) -> None:
        if self.tracker is not None:
            self.measured.start()  # type: ignore[union-attr]
            self.tracker.begin()

    def _abandon(self) -> None:
        if self.tracker is not None:
            self.tracker.abandon()

    @contextlib.contextmanager
    def _abandoned_on_failure(self):
        """A failed request leaves the upstream's in-flight count (and its energy window) as it found it; a
        transport error becomes an ``UpstreamError`` naming the upstream."""
        try:
            yield
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            self._abandon()
            raise self._error(error) from error
        except UpstreamError:
            self._abandon()
            raise

    async def complete(self, request: ParsedRequest) -> Answer:
        url, body = self._url_and_body(request, stream=False)
        self._begin()
        with self._abandoned_on_failure():
            async with self._session().post(url, json=body) as response:
                status, text = response.status, await response.text()
            data = checked_json(status, text, self.where)
            return self._answer(data, data.get("usage"))

    async def stream(self, request: ParsedRequest) -> Stream:
        url, body = self._url_and_body(request, stream=True)
        self._begin()
        with self._abandoned_on_failure():
            response = await self._session().post(url, json=body)
            if response.status >= 400:
                status, text = response.status, await response.text()
                response.release()
                checked_json(status, text, self.where)
        stream = Stream()
        stream.chunks = self._chunks(response, stream)
        return stream

    async def _chunks(self, response: aiohttp.ClientResponse, stream: Stream) -> AsyncIterator[dict]:
        usage, finished = None, False
        try:
            async for raw in response.content:  # one SSE line at a time
                line = raw.decode().strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = json.loads(payload)
                if "error" in chunk:
                    raise UpstreamError(self.where, 502, f"failed mid-stream: {chunk['error']}")
                usage = chunk.get("usage") or usage
                yield chunk
            finished = True
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            raise self._error(error, mid_stream=True) from error
        finally:
            response.release()
            if not finished:
                self._abandon()
        try:
            stream.answer = self._answer(None, usage)
        except UpstreamError:
            self._abandon()
            raise

    async def problem(self) -> str | None:
        try:
            async with self._session().get(self.base_url + "/models",
                                           timeout=aiohttp.ClientTimeout(total=2.0)) as response:
                status = response.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            return f"{self.where} unreachable: {type(error).__name__}"
        return None if status < 400 else f"{self.where} answered {status} on /models"

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()
        if self.measured is not None:
            await self.measured.aclose()


def checked_json(status: int, text: str, where: str) -> dict:
    if status >= 500:
        raise UpstreamError(where, 502, f"answered {status}: {text[:300]}")
    if status >= 400:  # the request's fault: pass the status and message on
        raise UpstreamError(where, status, f"rejected the request: {text[:300]}")
    try:
        return json.loads(text)
    except ValueError:
        raise UpstreamError(where, 502, "answered with a body that is not JSON") from None
