"""An upstream OpenAI-compatible server (``vllm serve``, jouleroute's own server, another gateway).

The client is aiohttp: under load the gateway's own CPU per request is what it adds to every
answer's latency, and aiohttp spends a fraction of what httpx does per call. Idle connections
are dropped after 2 s, before a server's usual 5 s keep-alive ends, so the gateway never sends
a request down a connection the server is closing.

A reply the gateway cannot read (a body that is not a JSON object, token counts that are not numbers, a stream
line that is not a JSON object) is the upstream's failure, as a dead upstream is: a 502 naming it and what was
wrong, before the first byte (so another candidate may answer), or the stream's error event after it. So is an
upstream's 4xx other than one about the request's content (``CLIENT_FAULT``): its own 401/403 (the gateway's key),
404 (a model it does not serve) or 429 (its rate limit) are the gateway's problem, never the client's.
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
    """Energy is measured on the upstream's GPU node when its exporter is named (gateway/measured.py): each answer's
    figure projected at its candidate's last measured rate (``projected:measured-*``), each interval settled as
    ``measured-*``; else the profile's expectation for the answer's token counts (``expected:<source>``)."""

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
        self.probe_session: aiohttp.ClientSession | None = None  # /readyz's own: a busy pool is not a dead upstream

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

    def _answer(self, body: dict | None, usage) -> Answer:
        prompt, completion = token_counts(usage, self.where)
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
                status, text = response.status, await response.text(errors="replace")
            data = checked_json(status, text, self.where)
            checked_choices(data, self.where, "answered with")
            return self._answer(data, data.get("usage"))

    async def stream(self, request: ParsedRequest) -> Stream:
        url, body = self._url_and_body(request, stream=True)
        self._begin()
        with self._abandoned_on_failure():
            response = await self._session().post(url, json=body)
            if response.status >= 400:
                status, text = response.status, await response.text(errors="replace")
                response.release()
                checked_json(status, text, self.where)
        stream = Stream()
        stream.chunks = self._chunks(response, stream)
        return stream

    async def _chunks(self, response: aiohttp.ClientResponse, stream: Stream) -> AsyncIterator[dict]:
        usage, finished = None, False
        try:
            async for raw in response.content:  # one SSE line at a time
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                chunk = stream_chunk(payload, self.where)
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
        # its own small pool: the answers' pool may be full (``concurrency`` requests in flight) on a busy gateway
        if self.probe_session is None or self.probe_session.closed:
            self.probe_session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=2, keepalive_timeout=2.0),
                                                       timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S),
                                                       headers=self.headers)
        try:
            async with self.probe_session.get(self.base_url + "/models") as response:
                status = response.status
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            return f"{self.where} unreachable: {type(error).__name__}"
        return None if status < 400 else f"{self.where} answered {status} on /models"

    async def aclose(self) -> None:
        for session in (self.session, self.probe_session):
            if session is not None:
                await session.close()
        if self.measured is not None:
            await self.measured.aclose()


PROBE_TIMEOUT_S = 2.0
# An upstream's 4xx that is about the request itself (its content, its size): the client's, passed on. Any other
# (401/403: the gateway's upstream key, 404: a model it does not serve, 429: its rate limit) is the upstream's 502.
CLIENT_FAULT = (400, 413, 422)


def checked_json(status: int, text: str, where: str) -> dict:
    """The upstream's JSON object, or the ``UpstreamError`` its status or body calls for."""
    if status in CLIENT_FAULT:  # the request's fault: pass the status and message on
        raise UpstreamError(where, status, f"rejected the request: {text[:300]}")
    if status >= 400:
        raise UpstreamError(where, 502, f"answered {status}: {text[:300]}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise UpstreamError(where, 502, "answered with a body that is not JSON") from None
    if not isinstance(data, dict):
        raise UpstreamError(where, 502, f"answered with a JSON {type(data).__name__}, not an object")
    return data


def stream_chunk(payload: str, where: str) -> dict:
    """One ``data:`` line of the upstream's stream as a chunk; an error event or a line that is not a chunk raises."""
    try:
        chunk = json.loads(payload)
    except (ValueError, RecursionError):
        raise UpstreamError(where, 502, f"failed mid-stream: a stream line that is not JSON: {payload[:100]!r}"
                            ) from None
    if not isinstance(chunk, dict):
        raise UpstreamError(where, 502, f"failed mid-stream: a stream line that is a JSON {type(chunk).__name__}, "
                                        "not an object")
    if "error" in chunk:
        raise UpstreamError(where, 502, f"failed mid-stream: {chunk['error']}")
    return checked_choices(chunk, where, "failed mid-stream:")


def checked_choices(data: dict, where: str, said: str) -> dict:
    """``data`` when its ``choices`` (if any) is a list of objects: what the gateway reads an answer's text from."""
    choices = data.get("choices")
    if choices is not None and not (isinstance(choices, list) and all(isinstance(c, dict) for c in choices)):
        raise UpstreamError(where, 502, f"{said} a `choices` that is not a list of objects")
    return data


def token_counts(usage, where: str) -> tuple[int, int]:
    """``usage``'s prompt and completion token counts, each a whole number ≥ 0, else the upstream's 502."""
    counts = [usage.get(k) if isinstance(usage, dict) else None for k in ("prompt_tokens", "completion_tokens")]
    if not isinstance(usage, dict) or not all(whole(n) for n in counts):
        raise UpstreamError(where, 502, f"answered without `usage` token counts (usage: {str(usage)[:100]})")
    return int(counts[0]), int(counts[1])


def whole(n) -> bool:
    return (isinstance(n, int) and not isinstance(n, bool) or isinstance(n, float) and n.is_integer()) and n >= 0
