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


class Backend(ABC):
    """Generates greedily (temperature 0) and deterministically, one batch per call."""

    name: str  # "transformers" | "openai" | "vllm"
    model_id: str  # what produced the text: a folder, a hub id, or the server's model name

    @abstractmethod
    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Run ``requests`` as one batch; results come back in request order."""

    def close(self) -> None:
        """Release the model or connection; the backend is unusable afterwards."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """``text`` up to the earliest stop string, and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
