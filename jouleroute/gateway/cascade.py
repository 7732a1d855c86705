"""The gateway's cascade mode: ask cheap candidates first, and a costlier stage only when their answers disagree.

``gateway.router.kind: cascade`` with ``gateway.router.chain: <file>`` serves ``jouleroute-auto`` by the chain
that the evaluation side chose on selection data, a JSON file read by the cascade library's own reader
(``jouleroute.cascade.artifact``, exactly these keys)::

    {"stages": [["cand_a", "cand_b"], ["cand_c"]], "max_output_tokens": 256, "chosen_by": "...", "selection": {}}

Each stage's candidates are asked in parallel, always non-streaming (their answers must be read whole to be
compared). A stage of two or more accepts when at least two answers agree (benchmarks/task_free.py: the same
normalised final number, boxed content or option letter); a stage of one accepts when an answer was extracted
and the answer's completion tokens are fewer than ``max_output_tokens`` (when set). Otherwise the next stage is
asked. The last stage always answers: its largest agreeing group, else its first member (chain order) with an
extracted answer, else its first member with any text. These are ``jouleroute.cascade.chain``'s rules, which
chose the chain, except where the evaluation has nothing to serve: it scores a last stage without agreement by
its first member even when that member failed or said nothing readable. An upstream that fails (down, timed
out, an error status, no text) counts as no answer: the reason is logged, counted in /metrics and written in
the response's ``usage.jouleroute.cascade``, and the stage escalates. When every member of the last stage fails,
the request gets the gateway's 502 naming each failure.

The client's ``stream: true`` gets the accepted answer as one chunk (then the finish and usage chunks): no
stage can be streamed before it is known to be the one that answers.

Energy counts every call: the response's ``X-Jouleroute-Energy-J`` is the sum of the calls' joules (each
projected from its node's exporter where the upstream names one, ``projected:measured-*``, else the profile's expectation, labelled), and
its ``X-Jouleroute-Energy-Source`` joins the calls' labels with ``+`` when they differ. A candidate whose
answer has no figure (``unavailable``) leaves the total unstated: a partial sum would understate it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter as Tally
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import Counter
from jouleroute.cascade.artifact import ChainArtifact
from jouleroute.cascade.chain import Chain
from jouleroute.benchmarks.task_free import extract_answer
from jouleroute.gateway.auth import KeyStore
from jouleroute.gateway.config import AUTO_MODEL, GatewayConfig
from jouleroute.gateway.protocol import GatewayError, ParsedRequest, Receipt, completion_body, has_text
from jouleroute.gateway.service import Gateway
from jouleroute.gateway.upstreams import Answer, Stream, Upstream, UpstreamError

logger = logging.getLogger(__name__)

NAME = "cascade"


def load_chain(path: Path) -> ChainArtifact:
    """The chain file at ``path``, read by the cascade library's reader (exactly its four keys); errors name the
    file and the field."""
    if not path.is_file():
        raise FileNotFoundError(f"gateway.router.chain: no chain file at {path}; the evaluation side writes it "
                                "(jouleroute/cascade/artifact.py), or write one by hand (docs/gateway.md, 'Cascade "
                                "mode')")
    return ChainArtifact.read(path)


def describe(chain: Chain) -> str:
    """The stages as the ``X-Jouleroute-Cascade`` header writes them: ``stage1=a,b;stage2=c``."""
    return ";".join(f"stage{i}={','.join(stage)}" for i, stage in enumerate(chain.stages, 1))


@dataclass
class Call:
    """One candidate asked in one stage: its answer (or why there is none) and what it cost."""

    stage: int  # 1-based
    candidate: str
    answer: Answer | None = None
    text: str = ""
    extracted: str | None = None
    error: str | None = None
    status: int | None = None  # the upstream error's status, when it failed
    latency_s: float = 0.0

    @property
    def energy_j(self) -> float | None:
        return self.answer.energy_j if self.answer is not None else None

    @property
    def energy_source(self) -> str:
        return self.answer.energy_source if self.answer is not None else f"failed:{self.status}"

    def record(self) -> dict:
        return {"stage": self.stage, "candidate": self.candidate, "answer": self.extracted,
                "energy_j": self.energy_j, "energy_source": self.energy_source,
                "completion_tokens": self.answer.completion_tokens if self.answer else None,
                "latency_s": round(self.latency_s, 6), "error": self.error}


@dataclass
class Decision:
    accepted: bool
    chosen: Call | None
    reason: str  # accepted: agreed | checked | last_stage; escalated: disagree | too_few_answers | no_answer | too_long


def decide(calls: list[Call], last: bool, max_output_tokens: int | None) -> Decision:
    """Whether a stage's answers settle the request, and whose answer is returned."""
    groups = Tally(c.extracted for c in calls if c.extracted)
    if len(calls) > 1 and groups:
        answer, size = max(groups.items(), key=lambda kv: kv[1])  # ties: the earliest member's group
        if size >= 2:
            return Decision(True, next(c for c in calls if c.extracted == answer), "agreed")
    if len(calls) == 1 and calls[0].extracted:
        tokens = calls[0].answer.completion_tokens if calls[0].answer else 0
        if max_output_tokens is None or tokens < max_output_tokens:  # as jouleroute.cascade.chain evaluates it
            return Decision(True, calls[0], "checked")
        if not last:
            return Decision(False, None, "too_long")
    if last:
        chosen = next((c for c in calls if c.extracted), None) or next((c for c in calls if c.text.strip()), None)
        return Decision(chosen is not None, chosen, "last_stage")
    if len(calls) == 1:
        return Decision(False, None, "no_answer")
    answered = sum(groups.values())
    return Decision(False, None, "disagree" if answered >= 2 else "too_few_answers" if answered else "no_answer")


@dataclass
class CascadeReceipt(Receipt):
    """A receipt for the whole chain: every call, the stage that answered, and the total joules."""

    calls: list[Call] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # one per stage asked
    stop: int = 0  # the stage whose answer was returned (1-based)

    def settle(self) -> None:
        """The total energy: the sum of every answered call's joules, labelled with their sources."""
        answered = [c for c in self.calls if c.answer is not None]
        sources = sorted({c.energy_source for c in answered})
        self.energy_source = "+".join(sources) if sources else "none"
        joules = [c.energy_j for c in answered]
        self.energy_j = None if any(j is None for j in joules) else float(sum(joules))
        self.counted = True

    def usage(self) -> dict:
        taken = [[c.candidate for c in self.calls if c.stage == i] for i in range(1, len(self.reasons) + 1)]
        return super().usage() | {"cascade": {"stages": taken, "stop_stage": self.stop, "reasons": self.reasons,
                                              "calls": [c.record() for c in self.calls]}}

    def headers(self) -> dict[str, str]:
        taken = ";".join(f"stage{i}={','.join(c.candidate for c in self.calls if c.stage == i)}"
                         for i in range(1, len(self.reasons) + 1))
        joules = ",".join(f"{c.candidate}={'-' if c.energy_j is None else format(c.energy_j, '.6g')}"
                          for c in self.calls)
        return super().headers() | {
            "X-Jouleroute-Cascade": taken, "X-Jouleroute-Cascade-Stop": str(self.stop),
            "X-Jouleroute-Cascade-Reasons": ",".join(self.reasons),
            "X-Jouleroute-Cascade-Energy-J": joules,
            "X-Jouleroute-Cascade-Energy-Source": ",".join(f"{c.candidate}={c.energy_source}" for c in self.calls)}


class CascadeGateway(Gateway):
    """A gateway whose ``jouleroute-auto`` is a cascade; a candidate named by the client is proxied as ever."""

    def __init__(self, cfg: GatewayConfig, chain: Chain, upstreams: dict[str, Upstream],
                 keys: KeyStore | None = None, compute_lock: threading.Lock | None = None, name: str = NAME) -> None:
        missing = [c for c in chain.candidates if c not in upstreams]
        if missing:
            raise ValueError(f"the cascade chain asks {missing}, which no upstream serves; add them to "
                             f"gateway.upstreams (served: {sorted(upstreams)})")
        super().__init__(cfg, None, upstreams, keys, compute_lock)
        self.chain, self.name = chain, name
        r = self.metrics.registry
        self.stops = Counter("jouleroute_gateway_cascade_stops", "Cascade requests answered, by the stage that "
                             "answered", ["stage"], registry=r)
        self.escalations = Counter("jouleroute_gateway_cascade_escalations",
                                   "Stages that passed the request on, by stage and reason (disagree, "
                                   "too_few_answers, no_answer, too_long)", ["stage", "reason"], registry=r)
        self.call_energy = Counter("jouleroute_gateway_cascade_energy_joules", "Joules of cascade calls, by stage, "
                                   "candidate and energy_source", ["stage", "candidate", "energy_source"], registry=r)
        self.failures = Counter("jouleroute_gateway_cascade_failed_calls", "Cascade calls that counted as no "
                                "answer because the upstream failed or gave no text", ["stage", "candidate"],
                                registry=r)
        for i in range(1, len(chain.stages) + 1):
            self.stops.labels(str(i))  # every stage shows, at 0 until it answers

    @property
    def policy(self) -> str:
        return f"{self.name} ({describe(self.chain)})"

    @property
    def models(self) -> list[str]:
        return [AUTO_MODEL, *self.upstreams]

    async def route(self, request: ParsedRequest, header_weight: float | None) -> tuple[list[str], Receipt]:
        if request.model != AUTO_MODEL:
            return await super().route(request, header_weight)
        refuse_unsupported(request)
        return [], CascadeReceipt(candidate="pending", lam=None, router=self.name)

    async def answer(self, request: ParsedRequest, order: list[str], receipt: Receipt) -> Answer:
        if not isinstance(receipt, CascadeReceipt):
            return await super().answer(request, order, receipt)
        return await self.run(request, receipt)

    async def open_stream(self, request: ParsedRequest, order: list[str], receipt: Receipt) -> Stream:
        if not isinstance(receipt, CascadeReceipt):
            return await super().open_stream(request, order, receipt)
        return Stream.of(await self.run(request, receipt), request.kind)

    async def run(self, request: ParsedRequest, receipt: CascadeReceipt) -> Answer:
        """Ask the chain stage by stage; the accepted answer, with the receipt filled in."""
        started = time.perf_counter()
        last = len(self.chain.stages)
        decision = Decision(False, None, "no_answer")
        for i, stage in enumerate(self.chain.stages, 1):
            calls = list(await asyncio.gather(*(self._ask(request, i, c) for c in stage)))
            receipt.calls += calls
            decision = decide(calls, i == last, self.chain.max_output_tokens)
            receipt.reasons.append(decision.reason)
            if decision.accepted:
                break
            if i < last:
                self.escalations.labels(str(i), decision.reason).inc()
                logger.info("cascade stage %d (%s) escalates: %s (answers %s)", i, ",".join(stage), decision.reason,
                            {c.candidate: c.extracted or c.error or "none" for c in calls})
        receipt.answer_s = time.perf_counter() - started
        receipt.settle()
        chosen = decision.chosen
        if chosen is None or chosen.answer is None:
            receipt.candidate = "none"
            failed = receipt.calls[-len(self.chain.stages[-1]):]
            statuses = {c.status for c in failed}
            status = statuses.pop() if len(statuses) == 1 and None not in statuses else 502
            raise GatewayError(status, "every candidate of the cascade's last stage failed: " +
                               "; ".join(c.error or f"{c.candidate}: no text" for c in failed),
                               type_="upstream_error", code="cascade_failed")
        receipt.candidate, receipt.stop = chosen.candidate, len(receipt.reasons)
        self.stops.labels(str(receipt.stop)).inc()
        a = chosen.answer
        finish = ((a.body.get("choices") or [{}])[0]).get("finish_reason") or "stop"
        body = completion_body(request.kind, chosen.candidate, chosen.text, finish, a.prompt_tokens,
                               a.completion_tokens)
        return Answer(body, a.prompt_tokens, a.completion_tokens, receipt.energy_j, receipt.energy_source)

    async def _ask(self, request: ParsedRequest, stage: int, candidate: str) -> Call:
        """One call, never raising: a failure is a ``Call`` with its error, logged and counted."""
        call, upstream = Call(stage, candidate), self.upstreams[candidate]
        started = time.perf_counter()
        try:
            call.answer = await upstream.complete(request)
        except UpstreamError as error:
            call.error, call.status = str(error), error.status
            self.metrics.upstream_errors.labels(candidate, str(error.status)).inc()
        except Exception as error:  # a bug in one upstream's client must not fail the other calls
            logger.exception("cascade call to %s failed", upstream.where)
            call.error, call.status = f"upstream {upstream.where}: {type(error).__name__}: {error}", 502
        call.latency_s = time.perf_counter() - started
        if call.answer is not None:
            a = call.answer
            self.metrics.answer(candidate, a.energy_j, a.energy_source, a.prompt_tokens, a.completion_tokens)
            if a.energy_j is not None:
                self.call_energy.labels(str(stage), candidate, a.energy_source).inc(max(a.energy_j, 0.0))
            call.text = answer_text(a.body) if has_text(a.body or {}) else ""
            call.extracted = extract_answer(call.text)
            if not call.text:
                call.error = f"upstream {upstream.where}: answered with no text"
                self.metrics.empty_answers.labels(candidate).inc()
        if call.error is not None:
            self.failures.labels(str(stage), candidate).inc()
            logger.warning("cascade stage %d: %s counts as no answer: %s", stage, candidate, call.error)
        return call


# What a cascade cannot serve, and why: it compares one text answer per candidate and returns that text
UNSUPPORTED = {
    "n": "it returns one answer, the one its stages accepted; send n=1",
    "logprobs": "its answer is the accepted text, not one model's tokens; leave it out",
    "top_logprobs": "its answer is the accepted text, not one model's tokens; leave it out",
    "tools": "its stages agree on text answers, and a tool call has no text to compare; leave it out",
    "functions": "its stages agree on text answers, and a function call has no text to compare; leave it out",
}


def refuse_unsupported(request: ParsedRequest) -> None:
    """A 400 naming the first field the cascade cannot honour (``UNSUPPORTED``), rather than drop it silently."""
    for param, why in UNSUPPORTED.items():
        value = request.body.get(param)
        if request.choices > 1 if param == "n" else value is not None and value is not False and value != []:
            raise GatewayError(400, f"'{param}' is not supported in cascade mode (got {param}={value!r}): {why}, "
                                    f"or name a candidate as the model (GET /v1/models)",
                               code="unsupported_parameter", param=param)


def answer_text(body: dict | None) -> str:
    """The first choice's text of a chat or completion body."""
    choice = ((body or {}).get("choices") or [{}])[0]
    message = choice.get("message")
    content = message.get("content") if isinstance(message, dict) else choice.get("text")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def cascade_gateway(cfg: GatewayConfig, root: Path, upstreams: dict, keys: KeyStore,
                    lock: threading.Lock, chain_file: Path | None = None) -> CascadeGateway:
    """The gateway of ``gateway.router.kind: cascade`` (or of a deployed cascade, ``chain_file``): the chain file's
    stages over ``upstreams`` (built, with the keys and the energy, as for a router: ``gateway.build``)."""
    path = chain_file or Path(cfg.router.chain or "")
    artifact = load_chain(path if path.is_absolute() else root / path)
    chain = artifact.chain
    gateway = CascadeGateway(cfg, chain, upstreams, keys, lock, name=f"{NAME}:{path.stem}")
    logger.info("serving the cascade %s (chosen for %s; a single answer accepted below %s tokens)", describe(chain),
                artifact.chosen_by, chain.max_output_tokens or "any number of")
    return gateway
