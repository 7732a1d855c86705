"""The HTTP face of the gateway: OpenAI-compatible endpoints, health, readiness and metrics.

Each completion request passes, in order: API key (401), per-key rate limit (429 +
Retry-After), admission (503 + Retry-After when ``max_pending`` requests are inside),
body size (413), body checks (400), prompt size (400), model (404), energy weight (400),
routing, then the upstream (502/504 naming it, or its 400/413/422 about the request; an answer
with no text, an unreadable reply or the upstream's own 401/403/429 is a 502 too, never a 200).
Every request leaves one JSON line in the access log (``jouleroute.gateway.access``) without prompt text, unless
``log_prompts`` is on, and is counted in ``/metrics``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from prometheus_client import CONTENT_TYPE_LATEST

from jouleroute.gateway.auth import bearer_key
from jouleroute.gateway.capture import capture_record
from jouleroute.gateway.config import AUTO_MODEL
from jouleroute.gateway.limits import retry_after
from jouleroute.gateway.openapi import FEEDBACK_OPENAPI, current_openapi
from jouleroute.gateway.protocol import (WEIGHT_HEADER, GatewayError, Kind, ParsedRequest, Receipt, parse_request,
                                         parse_weight, sse)
from jouleroute.gateway.reload import LiveGateway
from jouleroute.gateway.service import Gateway
from jouleroute.gateway.upstreams import Answer, Stream, UpstreamError

access_log = logging.getLogger("jouleroute.gateway.access")


@dataclass
class Visit:
    """One request's record, for the metrics and the access log."""

    request_id: str
    route: str
    client: str
    started: float = field(default_factory=time.perf_counter)
    key_id: str = "-"
    status: int = 500
    admitted: bool = False
    parsed: ParsedRequest | None = None
    receipt: Receipt | None = None
    answer: Answer | None = None
    error: str | None = None
    finished: bool = False
    text: list[str] = field(default_factory=list)  # a stream's answer, chunk by chunk (for the capture)
    gw: Gateway | None = None  # the gateway this request started on: it finishes there, whatever a reload swaps


ROUTES = ("/v1/chat/completions", "/v1/completions", "/v1/feedback")


def create_app(gateway: "Gateway | LiveGateway") -> FastAPI:
    """The app over ``gateway``, or over a ``LiveGateway`` that a reload swaps (gateway/reload.py): each request
    takes the gateway current when it arrives and finishes on it."""
    live = gateway if isinstance(gateway, LiveGateway) else LiveGateway(gateway)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        live.start()  # SIGHUP and the file watch, when the app runs in the main thread (`jouleroute serve`)
        yield
        await live.aclose()

    def visit_of(http: Request) -> Visit:
        return Visit(uuid.uuid4().hex[:16], http.url.path, http.client.host if http.client else "-", gw=live.current)

    app = FastAPI(title="jouleroute gateway", lifespan=lifespan, docs_url=None, redoc_url=None)

    @app.exception_handler(StarletteHTTPException)
    async def unrouted(http: Request, exc: StarletteHTTPException) -> JSONResponse:  # 404, 405: OpenAI's shape too
        error = GatewayError(exc.status_code, f"{http.method} {http.url.path}: {exc.detail}; the gateway answers "
                             f"POST {', '.join(ROUTES)} and GET /v1/models, /healthz, /readyz, /metrics, /openapi.json",
                             code="not_found" if exc.status_code == 404 else "method_not_allowed")
        return JSONResponse(error.body(), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    def authorize(http: Request, visit: Visit) -> None:
        gw = visit.gw
        if not gw.keys.required:
            visit.key_id = f"open:{http.client.host if http.client else '-'}"
            return
        key = bearer_key(http.headers.get("authorization"), http.headers.get("x-api-key"))
        if key is None:
            raise GatewayError(401, "missing API key: send 'Authorization: Bearer <key>'", "authentication_error",
                               "missing_api_key")
        key_id = gw.keys.check(key)
        if key_id is None:
            raise GatewayError(401, "invalid API key", "authentication_error", "invalid_api_key")
        visit.key_id = key_id

    def limit_rate(visit: Visit) -> None:
        refusal = visit.gw.limiter.take(visit.key_id)
        if refusal is not None:
            visit.gw.metrics.rate_limited.labels(refusal.limit).inc()
            raise GatewayError(429, refusal.message, "rate_limit_error", "rate_limited",
                               {"Retry-After": retry_after(refusal.wait_s)})

    async def read_body(http: Request, visit: Visit) -> bytes:
        limit = visit.gw.cfg.limits.max_body_bytes
        declared = http.headers.get("content-length")
        too_big = GatewayError(413, f"the request body exceeds {limit} bytes (gateway.limits.max_body_bytes)",
                               code="request_too_large")
        if declared and declared.isdigit() and int(declared) > limit:
            raise too_big
        body = bytearray()
        async for piece in http.stream():
            body += piece
            if len(body) > limit:
                raise too_big
        return bytes(body)

    def finish(visit: Visit) -> None:
        if visit.finished:  # a stream is finished by its generator or, if that never ran, after its response
            return
        visit.finished = True
        live.release(visit.gw)
        gw, r, p, a = visit.gw, visit.receipt, visit.parsed, visit.answer
        candidate = r.candidate if r else "none"
        gw.metrics.requests.labels(visit.route, candidate, str(visit.status)).inc()
        gw.metrics.request_seconds.labels(visit.route).observe(time.perf_counter() - visit.started)
        if a is not None and visit.status == 200 and not (r is not None and r.counted):
            gw.metrics.answer(candidate, a.energy_j, a.energy_source, a.prompt_tokens, a.completion_tokens)
        if visit.admitted:
            visit.admitted = False
            gw.admission.leave()
            gw.metrics.pending.dec()
        record = {"request_id": visit.request_id, "route": visit.route, "client": visit.client,
                  "key_id": visit.key_id, "status": visit.status,
                  "latency_s": round(time.perf_counter() - visit.started, 6),
                  "model": p.model if p else None, "stream": p.stream if p else None, "candidate": candidate,
                  "energy_weight": r.lam if r else None, "router_latency_s": round(r.router_wall_s, 6) if r else None,
                  "energy_j": r.energy_j if r else None, "energy_source": r.energy_source if r else None,
                  "prompt_tokens": a.prompt_tokens if a else None,
                  "completion_tokens": a.completion_tokens if a else None,
                  "fallback_from": r.fallback_from if r and r.fallback_from else None, "error": visit.error}
        if gw.cfg.log_prompts and p is not None:
            record["prompt"] = p.all_text
        access_log.info(json.dumps(record))
        if gw.capture is not None and p is not None:  # never blocks: a full queue drops and counts
            gw.capture.served(capture_record(visit.request_id, p.body | {"model": p.model}, p.task,
                                             gw.capture.cfg.keep_prompts, gw.version, visit.status,
                                             time.perf_counter() - visit.started, r.usage() if r else None,
                                             answer_text(visit), visit.error))

    def left(visit: Visit) -> None:
        """A stream's response ended and ``relay`` did not finish it: the client went away first."""
        if not visit.finished:
            visit.status, visit.error = 499, "client went away before the stream ended"
            finish(visit)

    def error_response(visit: Visit, error: GatewayError) -> JSONResponse:
        visit.status, visit.error = error.status, error.message
        headers = {"X-Request-Id": visit.request_id, VERSION_HEADER: visit.gw.version} | error.headers
        if visit.receipt is not None and error.status >= 500:
            headers |= visit.receipt.headers()
        return JSONResponse(error.body(), status_code=error.status, headers=headers)

    async def complete(http: Request, kind: Kind):
        visit = visit_of(http)
        visit.gw = live.hold()  # counted on its gateway until ``finish``: a reload lets a gateway go only when idle
        gw = visit.gw
        streaming = False
        try:
            authorize(http, visit)
            limit_rate(visit)
            if not gw.admission.enter():
                raise GatewayError(503, f"the gateway is full ({gw.cfg.limits.max_pending} requests pending); "
                                        "retry shortly", "overloaded_error", "overloaded", {"Retry-After": "1"})
            visit.admitted = True
            gw.metrics.pending.inc()
            visit.parsed = parse_request(await read_body(http, visit), kind)
            header = http.headers.get(WEIGHT_HEADER)
            header_weight = parse_weight(header, "the X-Energy-Weight header") if header is not None else None
            gw.check_prompt(visit.parsed)
            if gw.drift is not None and visit.parsed.model == AUTO_MODEL:  # off the request's path: a queue
                gw.drift.observe(visit.parsed.route_text, visit.parsed.task)
            order, visit.receipt = await gw.route(visit.parsed, header_weight)
            if visit.parsed.stream:
                stream = await gw.open_stream(visit.parsed, order, visit.receipt)
                streaming = True
                return FinishingStream(relay(visit, stream), lambda: left(visit), media_type="text/event-stream",
                                       headers=visit.receipt.headers() | {"X-Request-Id": visit.request_id,
                                                                          VERSION_HEADER: gw.version})
            visit.answer = await gw.answer(visit.parsed, order, visit.receipt)
            body = visit.answer.body | {"model": visit.receipt.candidate}
            body["usage"] = (body.get("usage") or {}) | {"jouleroute": visit.receipt.usage()}
            visit.status = 200
            return JSONResponse(body, headers=visit.receipt.headers() | {"X-Request-Id": visit.request_id,
                                                                         VERSION_HEADER: gw.version})
        except GatewayError as error:
            return error_response(visit, error)
        finally:
            if not streaming:
                finish(visit)

    async def relay(visit: Visit, stream: Stream):
        """Pass the upstream's chunks on; the energy goes on the last chunk, once the token counts are in. Finish
        chunks are held to the end (one per choice when ``n`` > 1), so the last of them can carry it."""
        gw, parsed, receipt = visit.gw, visit.parsed, visit.receipt
        finishes: list[dict] = []
        usage_chunk = None
        try:
            async for chunk in stream.chunks:
                chunk["model"] = receipt.candidate
                if chunk.get("usage") and not chunk.get("choices"):
                    usage_chunk = chunk
                elif any(c.get("finish_reason") for c in chunk.get("choices") or []):
                    finishes.append(chunk)
                else:
                    yield sse(chunk)
                visit.text += [c.get("text") or (c.get("delta") or {}).get("content") or ""
                               for c in chunk.get("choices") or []]
            visit.answer = answer = stream.answer
            receipt.energy_j, receipt.energy_source = answer.energy_j, answer.energy_source
            usage = {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens,
                     "total_tokens": answer.prompt_tokens + answer.completion_tokens,
                     "jouleroute": receipt.usage()}
            held = finishes[-1] if finishes else None
            for chunk in finishes[:-1]:
                yield sse(chunk)
            if held is not None and not parsed.include_usage:
                held["usage"] = usage  # no usage chunk was asked for: the energy rides on the last chunk
                yield sse(held)
            else:
                if held is not None:
                    yield sse(held)
                base = usage_chunk or held or {"model": receipt.candidate}
                yield sse({k: v for k, v in base.items() if k not in ("choices", "usage")} | {"choices": [],
                                                                                          "usage": usage})
            yield sse("[DONE]")
            visit.status = 200
        except UpstreamError as error:
            gw.metrics.upstream_errors.labels(receipt.candidate, str(error.status)).inc()
            visit.status, visit.error = error.status, str(error)
            yield sse(GatewayError(error.status, str(error), "upstream_error", "upstream_failed").body())
        except BaseException:
            visit.status, visit.error = 499, "client went away mid-stream"
            raise
        finally:
            finish(visit)

    @app.post("/v1/chat/completions")  # its OpenAPI operation: gateway/openapi.py, for the gateway serving now
    async def chat_completions(http: Request):
        return await complete(http, "chat")

    @app.post("/v1/completions")
    async def completions(http: Request):
        return await complete(http, "completion")

    @app.post("/v1/feedback", openapi_extra=FEEDBACK_OPENAPI)
    async def feedback(http: Request):
        """A user's score in [0, 1] for a served request, by its X-Request-Id: the next tournament's feedback labels."""
        visit = visit_of(http)
        gw = visit.gw
        try:
            authorize(http, visit)
            limit_rate(visit)  # the same per-key limits as the answers: feedback is written to disk
            try:
                body = json.loads(await read_body(http, visit))
            except (ValueError, UnicodeDecodeError, RecursionError):
                raise GatewayError(400, "the request body is not valid JSON") from None
            request_id, score = (body.get("request_id"), body.get("score")) if isinstance(body, dict) else (None, None)
            if not isinstance(request_id, str) or not request_id:
                raise GatewayError(422, "request_id: a served request's X-Request-Id is required", code="invalid_value")
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
                raise GatewayError(422, f"score must be a number in [0, 1], got {score!r}", code="invalid_value")
            known, candidate = gw.capture.candidate_of(request_id) if gw.capture is not None else (False, None)
            if not known:
                why = "" if gw.capture is not None else " (gateway.capture is off: this gateway keeps no request ids)"
                raise GatewayError(404, f"unknown request_id {request_id!r}: no captured request has it{why}",
                                   code="unknown_request_id")
            named = body.get("candidate")  # another candidate's answer to the same query may be scored (a shadow)
            if named is not None and named not in gw.upstreams:
                raise GatewayError(422, f"candidate: {named!r} is not served here (GET /v1/models)",
                                   code="invalid_value")
            gw.capture.feedback({"request_id": request_id, "candidate": named or candidate,
                                 "score": float(score), "key_id": visit.key_id, "created": round(time.time(), 6)})
            visit.status = 202
            return JSONResponse({"request_id": request_id, "accepted": True}, status_code=202,
                                headers={"X-Request-Id": visit.request_id})
        except GatewayError as error:
            return error_response(visit, error)

    @app.get("/v1/models")
    async def models(http: Request):
        visit = visit_of(http)
        gw = visit.gw
        try:
            authorize(http, visit)
        except GatewayError as error:
            return error_response(visit, error)
        data = [{"id": m, "object": "model", "owned_by": "jouleroute"} for m in gw.models]
        return {"object": "list", "data": data}

    @app.get("/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz():
        gw = live.current
        problems = await gw.problems()  # the router is loaded before the app exists
        body = {"status": "ready" if not problems else "not ready", "router": gw.policy, "version": gw.version,
                "upstreams": list(gw.upstreams), "problems": problems}
        return JSONResponse(body, status_code=200 if not problems else 503)

    @app.get("/metrics")
    async def metrics():
        return Response(live.current.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.openapi = current_openapi(app, live)
    return app


VERSION_HEADER = "X-Jouleroute-Policy-Version"  # the served policy's version, on every completion response


class FinishingStream(StreamingResponse):
    """A stream that finishes its request however its response ends. ``relay`` finishes it when the stream ran;
    a client that went away before the stream began (the server's ``send`` raised, or it cancelled the request)
    never runs ``relay``, nor a background task, so ``on_end`` runs here: the admission count and the gateway's
    hold are always given back."""

    def __init__(self, content, on_end: Callable[[], None], **kwargs) -> None:
        super().__init__(content, **kwargs)
        self.on_end = on_end

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.on_end()


def answer_text(visit: "Visit") -> str | None:
    """The answer served: a non-streamed body's first choice, or a stream's text chunks joined."""
    if visit.text:
        return "".join(visit.text)
    body = visit.answer.body if visit.answer is not None and isinstance(visit.answer.body, dict) else None
    choice = ((body or {}).get("choices") or [{}])[0]
    return (choice.get("message") or {}).get("content") or choice.get("text")
