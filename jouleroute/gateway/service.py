"""The gateway's work between the HTTP layer and the upstreams: pick the candidate, get the answer.

``Gateway`` holds the router, the upstreams, the limits and the metrics. ``route`` decides
who answers (the router for ``jouleroute-auto``, the client otherwise); ``answer`` and
``open_stream`` call the upstreams in that order, moving to the next-best candidate on an
upstream failure when fallback is on, and say so in the receipt. An answer with no text (a
base model that stops at once) is such a failure: it is never served as a 200, and a stream
is held back until its first text arrives, so an empty one can still fall back.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from typing import AsyncIterator

from jouleroute.gateway.auth import KeyStore
from jouleroute.gateway.config import AUTO_MODEL, GatewayConfig
from jouleroute.gateway.limits import Admission, RateLimiter
from jouleroute.gateway.metrics import GatewayMetrics
from jouleroute.gateway.protocol import GatewayError, ParsedRequest, Receipt, has_text
from jouleroute.gateway.routers import GatewayRouter, Query, RouteBatcher
from jouleroute.gateway.upstreams import Answer, Stream, Upstream, UpstreamError

logger = logging.getLogger(__name__)

BYTES_PER_TOKEN = 4  # the prompt-token estimate when no tokenizer is at hand


class Gateway:
    def __init__(self, cfg: GatewayConfig, router: GatewayRouter | None, upstreams: dict[str, Upstream],
                 keys: KeyStore | None = None, compute_lock: threading.Lock | None = None, tokenizer=None) -> None:
        if router is not None:
            missing = sorted(set(router.candidates) - set(upstreams))
            if missing:
                raise ValueError(f"the router ({router.name}) can choose {missing}, which no upstream serves; "
                                 f"add them to gateway.upstreams (served: {sorted(upstreams)})")
        self.cfg, self.router, self.upstreams = cfg, router, upstreams
        self.keys = keys or KeyStore(set())
        self.lock = compute_lock or threading.Lock()
        self.tokenizer = tokenizer or (router.tokenizer() if router is not None else None)
        self.metrics = GatewayMetrics()
        self.limiter = RateLimiter(cfg.limits.rate_per_minute, cfg.limits.burst)
        self.admission = Admission(cfg.limits.max_pending)
        self.batcher = (RouteBatcher(router, self.lock, cfg.router.batch_size, cfg.router.batch_wait_s)
                        if router is not None else None)
        self.capture = None  # gateway/capture.Capture when gateway.capture.folder is set (gateway/build.py)
        self.version = "unversioned"  # the served policy's version, on every response (X-Jouleroute-Policy-Version)
        self.drift = None  # gateway/drift.DriftMonitor when gateway.drift.enabled (gateway/build.py)
        self.in_flight = 0  # completion requests begun on this gateway and not finished (gateway/reload.py)

    @property
    def policy(self) -> str | None:
        """What answers ``jouleroute-auto`` (``/readyz``): the router's name, a cascade's chain, or None."""
        return self.router.name if self.router is not None else None

    @property
    def models(self) -> list[str]:
        return ([AUTO_MODEL] if self.router is not None else []) + list(self.upstreams)

    def check_prompt(self, request: ParsedRequest) -> None:
        limit = self.cfg.limits.max_prompt_tokens
        if self.tokenizer is not None:
            n, how = len(self.tokenizer(request.all_text, add_special_tokens=False)["input_ids"]), "tokens"
        else:
            n, how = math.ceil(len(request.all_text.encode()) / BYTES_PER_TOKEN), "tokens (estimated, 4 bytes each)"
        if n > limit:
            raise GatewayError(400, f"the prompt is {n} {how}; this gateway accepts at most {limit} "
                                    "(gateway.limits.max_prompt_tokens)", code="prompt_too_long")
        asked = request.max_tokens_asked if request.max_tokens_asked is not None else request.max_tokens
        if asked is not None and asked * request.choices > self.cfg.limits.max_output_tokens:
            field = next((k for k in ("max_completion_tokens", "max_tokens") if request.body.get(k) == asked),
                         "max_tokens")  # the one the client sent that is over the limit
            what = f"{field}={asked}" if request.choices == 1 else \
                f"n={request.choices} choices of {field}={asked} ({asked * request.choices} output tokens)"
            raise GatewayError(400, f"{what} exceeds this gateway's limit of "
                                    f"{self.cfg.limits.max_output_tokens} (gateway.limits.max_output_tokens)")

    async def route(self, request: ParsedRequest, header_weight: float | None) -> tuple[list[str], Receipt]:
        """The candidates to try, best first, and the receipt so far."""
        if request.weight is not None and header_weight is not None and request.weight != header_weight:
            raise GatewayError(400, f"two energy weights: X-Energy-Weight {header_weight:g} and "
                                    f"energy_weight {request.weight:g}; send one")
        weight = request.weight if request.weight is not None else header_weight
        known = self.router.known_tasks() if self.router is not None and request.task else None
        if known is not None and request.task not in known:
            raise GatewayError(400, f"unknown task '{request.task}': the router ({self.router.name}) knows {known}; "
                                    "send one of them, or no 'task' to route with the pool-wide energies",
                               code="unknown_task")
        if request.model in self.upstreams:  # the client chose: no routing, λ unused
            return [request.model], Receipt(candidate=request.model, lam=None)
        if request.model != AUTO_MODEL or self.router is None:
            raise GatewayError(404, f"model '{request.model}' is not served here; available: {self.models}",
                               code="model_not_found")
        try:
            lam = self.router.check_lambda(self.router.default_lam if weight is None else weight)
        except ValueError as error:
            raise GatewayError(400, f"{error}; send X-Energy-Weight within it", code="energy_weight_out_of_range")
        started = time.perf_counter()
        try:
            result = await self.batcher.route(Query(request.route_text, request.task, lam))
        except Exception as error:  # a router bug must not take the gateway down: 500, logged
            logger.exception("routing failed")
            raise GatewayError(500, f"the router ({self.router.name}) failed: {type(error).__name__}: {error}",
                               "server_error", "routing_failed") from error
        wall = time.perf_counter() - started
        self.metrics.routing_seconds.observe(wall)
        self.metrics.router_energy.labels(self.router.name, result.energy_source).inc(
            result.energy_j if math.isfinite(result.energy_j) else 0.0)
        order = result.ranking if self.cfg.fallback else result.ranking[:1]
        return order, Receipt(candidate=order[0], lam=lam, router=self.router.name, router_wall_s=wall,
                              router_compute_s=result.compute_s, router_energy_j=result.energy_j,
                              router_energy_source=result.energy_source)

    async def _try(self, order: list[str], receipt: Receipt, call):
        for i, candidate in enumerate(order):
            upstream = self.upstreams[candidate]
            started = time.perf_counter()
            try:
                out = await call(upstream)
                out = await self._with_text(candidate, upstream, out)
            except UpstreamError as error:
                self.metrics.upstream_errors.labels(candidate, str(error.status)).inc()
                logger.warning("%s", error)
                if not error.retryable or i == len(order) - 1:
                    hint = ("; set gateway.fallback: true to let the router's next-best candidate answer"
                            if isinstance(error, EmptyAnswer) and not self.cfg.fallback and receipt.router != "none" else "")
                    raise GatewayError(error.status, str(error) + _tried(receipt.fallback_from) + hint,
                                       type_="upstream_error", code=error.code) from error
                receipt.fallback_from.append(candidate)
                continue
            receipt.candidate, receipt.answer_s = candidate, time.perf_counter() - started
            if receipt.fallback_from:
                self.metrics.fallbacks.labels(receipt.fallback_from[0], candidate).inc()
            return out
        raise AssertionError("no candidate to try")

    async def _with_text(self, candidate: str, upstream: Upstream, out: Answer | Stream) -> Answer | Stream:
        """``out`` once it is known to hold text; an empty answer raises ``EmptyAnswer`` (counted, and its
        joules too: they were spent). A stream's chunks are read up to the first one with text and replayed."""
        if isinstance(out, Stream) and out.answer is None:
            held: list[dict] = []
            async for chunk in out.chunks:
                held.append(chunk)
                if has_text(chunk):
                    out.chunks = _replay(held, out.chunks)
                    return out
            answer, body = out.answer, None  # the stream ended without text; its usage is in by now
        else:
            answer = out.answer if isinstance(out, Stream) else out
            body = answer.body
            if has_text(body):
                return out
        self.metrics.empty_answers.labels(candidate).inc()
        tokens = ""
        if answer is not None:
            self.metrics.answer(candidate, answer.energy_j, answer.energy_source, answer.prompt_tokens,
                                answer.completion_tokens)
            tokens = f" after {answer.completion_tokens} token(s)"
        finish = ((body or {}).get("choices") or [{}])[0].get("finish_reason")
        raise EmptyAnswer(upstream.where, f"answered with no text{tokens}"
                                          f"{f' (finish_reason {finish!r})' if finish else ''}")

    async def answer(self, request: ParsedRequest, order: list[str], receipt: Receipt) -> Answer:
        answer = await self._try(order, receipt, lambda u: u.complete(request))
        receipt.energy_j, receipt.energy_source = answer.energy_j, answer.energy_source
        return answer

    async def open_stream(self, request: ParsedRequest, order: list[str], receipt: Receipt) -> Stream:
        stream = await self._try(order, receipt, lambda u: u.stream(request))
        if stream.answer is not None:  # in-process: the whole answer is already known
            receipt.energy_j, receipt.energy_source = stream.answer.energy_j, stream.answer.energy_source
        return stream

    async def problems(self) -> list[str]:
        found = await asyncio.gather(*(u.problem() for u in self.upstreams.values()))
        return [p for p in found if p]

    def retire(self) -> None:
        """Stop what is this gateway's own (the routing worker, the drift thread), once a reload has swapped it out
        and its requests are done; the upstreams, keys and capture go on with the gateway that replaced it."""
        if self.batcher is not None and self.batcher.worker is not None:
            self.batcher.worker.cancel()
        if self.drift is not None:
            self.drift.stop()

    async def aclose(self) -> None:
        if self.drift is not None:
            self.drift.stop()
        await asyncio.gather(*(u.aclose() for u in self.upstreams.values()))
        if self.capture is not None:  # what is queued is written before the process ends
            await asyncio.to_thread(self.capture.close)


class EmptyAnswer(UpstreamError):
    """An upstream answered 200 with no text: the gateway's 502, and another candidate may answer."""

    code = "empty_answer"

    def __init__(self, upstream: str, message: str) -> None:
        super().__init__(upstream, 502, message)


async def _replay(held: list[dict], rest: AsyncIterator[dict]) -> AsyncIterator[dict]:
    for chunk in held:
        yield chunk
    async for chunk in rest:
        yield chunk


def _tried(failed: list[str]) -> str:
    return f" (after falling back from {failed})" if failed else ""
