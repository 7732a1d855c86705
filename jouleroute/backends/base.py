"""One interface for every way of running a model: a batch of requests in, texts and token counts out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GenRequest:
    """A plain-text ``prompt`` (completion, few-shot) or chat ``messages`` (chat template), not both.

    ``stop``: generation ends at the first of these strings, which is not part of the text.
    """

    prompt: str | None = None
    messages: list[dict] | None = None
    max_new_tokens: int = 256
    stop: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("GenRequest needs exactly one of `prompt` and `messages`")
        if self.max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be > 0, got {self.max_new_tokens}")
        if any(not s for s in self.stop):
            raise ValueError("stop strings must be non-empty")


@dataclass(frozen=True)
class GenResult:
    """What one request produced. ``latency_s`` is the batch window for in-process backends.

    ``output_tokens`` counts generated tokens up to and including the EOS token or the token
    that completed a stop string (as vLLM's ``usage.completion_tokens`` does), never padding.
    ``finish_reason`` is ``"stop"`` (EOS or stop string) or ``"length"``.
    """

    text: str
    input_tokens: int
    output_tokens: int
    latency_s: float
    ttft_s: float | None = None
    finish_reason: str = "length"


@dataclass(frozen=True)
class LoglikRequest:
    """Score each continuation after ``context`` (lm-evaluation-harness convention); nothing is decoded.

    ``labels[i]`` is the answer that continuation ``i`` stands for ("B", "(C)", "True"); the chosen
    label comes back as the result's text (``"Answer: B"``), so the task's grader reads it like any
    generated answer. A continuation normally starts with a space ("Answer:" + " Paris").
    """

    context: str
    continuations: tuple[str, ...]
    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.continuations) < 2 or len(self.continuations) != len(self.labels):
            raise ValueError("LoglikRequest needs >= 2 continuations and one label per continuation")
        if any(not c for c in self.continuations):
            raise ValueError("continuations must be non-empty")


def best_normalized(logliks: list[float], continuations: tuple[str, ...]) -> int:
    """Index of the best log-likelihood per UTF-8 byte of the continuation (lm-eval's ``acc_norm``).

    Normalizing by bytes, not tokens, keeps the choice independent of the tokenizer. Ties go to
    the first choice, so the result is deterministic.
    """
    scores = [ll / len(c.encode("utf-8")) for ll, c in zip(logliks, continuations)]
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


class Backend(ABC):
    """Generates greedily (temperature 0) and deterministically, one batch per call."""

    name: str  # "transformers" | "openai" | "vllm"
    model_id: str  # what produced the text: a folder, a hub id, or the server's model name

    @abstractmethod
    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Run ``requests`` as one batch; results come back in request order."""

    def loglik(self, requests: list[LoglikRequest]) -> list[GenResult]:
        """Answer multiple-choice ``requests`` by log-likelihood; ``output_tokens`` is 0 (no decoding)."""
        raise NotImplementedError(
            f"the {self.name} backend cannot score log-likelihoods; use answer_style 'direct' or 'cot' for "
            "its candidates, or backend.kind 'transformers'")

    def close(self) -> None:
        """Release the model or connection; the backend is unusable afterwards."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def answer_requests(backend: Backend, requests: list) -> list[GenResult]:
    """Run a batch holding generation and/or log-likelihood requests; results in request order."""
    scored = [i for i, r in enumerate(requests) if isinstance(r, LoglikRequest)]
    generated = [i for i, r in enumerate(requests) if not isinstance(r, LoglikRequest)]
    results: list[GenResult | None] = [None] * len(requests)
    for indices, run in ((scored, backend.loglik), (generated, backend.generate)):
        if indices:
            for i, result in zip(indices, run([requests[i] for i in indices])):
                results[i] = result
    return results  # type: ignore[return-value]


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """``text`` up to the earliest stop string, and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
