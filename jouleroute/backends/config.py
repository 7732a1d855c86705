"""Typed ``backend`` section of params.yaml."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jouleroute.strict import StrictModel


class BackendConfig(StrictModel):
    """Which engine generates: in-process transformers or vLLM, or an OpenAI-compatible server."""

    kind: Literal["transformers", "openai", "vllm"] = "transformers"
    device: Literal["auto", "cpu", "cuda"] = "auto"  # transformers / vllm
    base_url: str = "http://127.0.0.1:8000/v1"  # openai: the server's /v1 root
    api_key_env: str | None = None  # openai: name of the env var holding the key (never the key)
    concurrency: int = Field(default=8, gt=0)  # openai: requests in flight at once
    timeout_s: float = Field(default=300.0, gt=0)  # openai: per HTTP request
    max_retries: int = Field(default=3, ge=0)  # openai: on connection errors and 5xx
    stream: bool = True  # openai: stream responses to time the first token (ttft_s)
    torch_threads: int | None = Field(default=None, gt=0)  # transformers on CPU; None: torch's default
