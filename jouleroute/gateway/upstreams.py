"""Where a candidate's answer comes from: the interface, and a model in this process (``remote``: a server).

Both give a whole answer (``complete``) or a stream (``stream``). A failure raises
``UpstreamError`` naming the upstream: before the first byte the gateway can still answer
502/504 or fall back to another candidate; mid-stream it can only end the stream with an
error event.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import AsyncIterator

from jouleroute.backends.base import Backend, GenRequest
from jouleroute.energy.base import Meter
from jouleroute.gateway.protocol import ParsedRequest, body_chunks, completion_body
from jouleroute.pool import CandidateSpec


class UpstreamError(Exception):
    """``status``: what the gateway answers (502 failed, 504 timed out, or the upstream's 400/413/422 about the
    request itself, gateway/remote.py ``CLIENT_FAULT``)."""

    code = "upstream_failed"  # the OpenAI error code the gateway answers with

    def __init__(self, upstream: str, status: int, message: str) -> None:
        super().__init__(f"upstream {upstream}: {message}")
        self.upstream, self.status = upstream, status

    @property
    def retryable(self) -> bool:  # the upstream is at fault (its 401/403/429 too), so another candidate may answer
        return self.status in (502, 504)


@dataclass
class Answer:
    body: dict  # the OpenAI response (non-streaming), or None while a stream runs
    prompt_tokens: int
    completion_tokens: int
    energy_j: float | None
    energy_source: str


class Stream:
    """``chunks`` yields response chunks; ``answer`` holds the token counts and energy once they are done."""

    def __init__(self, chunks: AsyncIterator[dict] | None = None) -> None:
        self.chunks = chunks
        self.answer: Answer | None = None

    @classmethod
    def of(cls, answer: Answer, kind: str) -> "Stream":
        """A whole answer streamed as one chunk, then its finish and usage chunks."""
        async def chunks() -> AsyncIterator[dict]:
            for chunk in body_chunks(answer.body, kind):
                yield chunk

        stream = cls(chunks())
        stream.answer = answer
        return stream


class Upstream(ABC):
    candidate_id: str
    where: str  # how errors and /readyz name it

    @abstractmethod
    async def complete(self, request: ParsedRequest) -> Answer: ...

    @abstractmethod
    async def stream(self, request: ParsedRequest) -> Stream: ...

    @abstractmethod
    async def problem(self) -> str | None:
        """None when ready, else what is wrong (for /readyz)."""

    async def aclose(self) -> None:
        return None


# Generic forms of the candidates' answer styles (benchmarks/prompts.py words them per task).
CHAT_STYLE = {"direct": "Reply with only the final answer.",
              "cot": "Think step by step, then give the final answer on the last line."}


class InProcessUpstream(Upstream):
    """A pool candidate generated in this process, metered: one window per answer under ``compute_lock``.

    The candidate is a model *and* a way of asking: chat candidates get the answer style's
    instruction appended to the last user turn; few-shot (base-model) candidates get a chat
    rendered as ``Question: ... Answer:``. Plain completions are passed as they are.
    """

    def __init__(self, candidate: CandidateSpec, backend: Backend, meter: Meter, compute_lock: threading.Lock) -> None:
        from jouleroute.benchmarks.prompts import stop_sequences

        self.candidate_id, self.spec, self.backend, self.meter = candidate.candidate_id, candidate, backend, meter
        self.lock = compute_lock
        # a loglik candidate answers free-form queries in its generation style
        self.style = getattr(candidate, "generation_style", candidate.answer_style)
        self.fewshot_stop = list(stop_sequences(self.style))
        self.where = f"'{candidate.candidate_id}' (in-process {backend.name}: {backend.model_id})"

    def gen_request(self, request: ParsedRequest) -> GenRequest:
        body = request.body
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else [s for s in stop if isinstance(s, str) and s]
        max_new = request.max_tokens or self.spec.max_new_tokens
        if request.kind == "completion":
            return GenRequest(prompt=body["prompt"], max_new_tokens=max_new, stop=stop)
        if self.spec.prompt_style == "fewshot":
            opener = " Let's think step by step." if self.style == "cot" else ""
            # one "Answer:" cue: after a doubled one ("... Answer:\nAnswer:") a base model starts the next
            # "Question:" at once, and the stop string leaves nothing (gemma3 did, issue 22)
            question = request.route_text.strip().removesuffix("Answer:").rstrip()
            return GenRequest(prompt=f"Question: {question}\nAnswer:{opener}",
                              max_new_tokens=max_new, stop=stop + self.fewshot_stop)
        messages = [dict(m) for m in body["messages"]]
        last = max(i for i, m in enumerate(messages) if m["role"] == "user") if any(
            m["role"] == "user" for m in messages) else len(messages) - 1
        messages[last]["content"] = f"{request.route_text}\n\n{CHAT_STYLE[self.style]}"
        return GenRequest(messages=messages, max_new_tokens=max_new, stop=stop)

    def _generate(self, gen: GenRequest):
        with self.lock, self.meter.window() as box:
            result = self.backend.generate([gen])[0]
        return result, box[0]

    async def complete(self, request: ParsedRequest) -> Answer:
        try:
            gen = self.gen_request(request)
            result, window = await asyncio.to_thread(self._generate, gen)
        except ValueError as error:  # e.g. a chat sent to a model without a chat template
            raise UpstreamError(self.where, 400, str(error)) from error
        except Exception as error:
            raise UpstreamError(self.where, 502, f"generation failed: {type(error).__name__}: {error}") from error
        body = completion_body(request.kind, self.candidate_id, result.text, result.finish_reason,
                               result.input_tokens, result.output_tokens)
        return Answer(body, result.input_tokens, result.output_tokens, window.energy_j, window.source)

    async def stream(self, request: ParsedRequest) -> Stream:
        # In-process generation is not incremental: the whole answer is the first chunk.
        return Stream.of(await self.complete(request), request.kind)

    async def problem(self) -> str | None:
        return None if getattr(self.backend, "model", True) is not None else f"{self.where} is closed"

