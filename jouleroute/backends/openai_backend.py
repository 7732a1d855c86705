"""Client for any OpenAI-compatible server (``vllm serve``, ``jouleroute.backends.serve``).

Chat ``messages`` go to ``/chat/completions``, plain prompts to ``/completions``; always
temperature 0. Token counts come from the server's ``usage``. With ``stream`` on, the
response is streamed (``stream_options.include_usage``) and ``ttft_s`` is the time to the
first content chunk; otherwise ``ttft_s`` is None. Connection errors and 5xx are retried
with exponential backoff; a 4xx raises at once with the server's message.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

from jouleroute.backends.base import Backend, GenRequest, GenResult

logger = logging.getLogger(__name__)


class BackendRequestError(RuntimeError):
    """The server rejected a request, or kept failing after the retries."""


# One limit per server, shared by every client of it in this process (two candidates of one server share it).
_SERVER_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


def server_slots(base_url: str, concurrency: int) -> threading.BoundedSemaphore:
    """The semaphore that keeps at most ``concurrency`` requests in flight to ``base_url`` (first size wins)."""
    with _SLOTS_LOCK:
        return _SERVER_SLOTS.setdefault(base_url.rstrip("/"), threading.BoundedSemaphore(concurrency))


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(
        self,
        base_url: str,
        model_id: str,
        api_key_env: str | None = None,
        concurrency: int = 8,
        timeout_s: float = 300.0,
        max_retries: int = 3,
        stream: bool = True,
        backoff_s: float = 0.5,
    ) -> None:
        headers = {}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise BackendRequestError(f"api_key_env names ${api_key_env} (for {base_url}), which is not set")
            headers["Authorization"] = f"Bearer {key}"
        self.model_id = model_id
        self.base_url = base_url.rstrip("/")
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.stream = stream
        self.backoff_s = backoff_s
        self._slots = server_slots(self.base_url, concurrency)
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=concurrency),
        )

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        if len(requests) <= 1 or self.concurrency == 1:
            return [self._one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(self._one, requests))

    def _payload(self, request: GenRequest) -> tuple[str, dict]:
        body: dict = {"model": self.model_id, "max_tokens": request.max_new_tokens, "temperature": 0.0}
        if request.stop:
            body["stop"] = list(request.stop)
        if self.stream:
            body |= {"stream": True, "stream_options": {"include_usage": True}}
        if request.messages is not None:
            return "/chat/completions", body | {"messages": request.messages}
        return "/completions", body | {"prompt": request.prompt}

    def _one(self, request: GenRequest) -> GenResult:
        path, body = self._payload(request)
        for attempt in range(self.max_retries + 1):
            try:
                with self._slots:
                    return self._post(path, body)
            except (httpx.TransportError, _ServerError) as error:
                if attempt == self.max_retries:
                    raise BackendRequestError(
                        f"{self.base_url}{path} still failing after {self.max_retries + 1} attempts: {error}"
                    ) from error
                wait = self.backoff_s * 2**attempt
                logger.warning("%s%s failed (%s); retry %d in %.1f s", self.base_url, path, error, attempt + 1, wait)
                time.sleep(wait)
        raise AssertionError("unreachable")

    def _post(self, path: str, body: dict) -> GenResult:
        started = time.perf_counter()
        if not body.get("stream"):
            response = self._client.post(path, json=body)
            _raise_for_status(response, path)
            data = response.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] if "message" in choice else choice["text"]
            return _result(text or "", data.get("usage"), time.perf_counter() - started, None, choice, path)
        pieces: list[str] = []
        ttft_s = None
        usage = None
        choice: dict = {}
        with self._client.stream("POST", path, json=body) as response:
            if response.status_code >= 400:
                response.read()
            _raise_for_status(response, path)
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[len("data:") :].strip()
                if payload == "[DONE]":
                    break
                chunk = json.loads(payload)
                usage = chunk.get("usage") or usage
                for choice in chunk.get("choices") or []:
                    piece = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
                    if piece and ttft_s is None:
                        ttft_s = time.perf_counter() - started
                    pieces.append(piece)
        return _result("".join(pieces), usage, time.perf_counter() - started, ttft_s, choice, path)

    def close(self) -> None:
        self._client.close()


class _ServerError(RuntimeError):
    """A 5xx answer: worth retrying."""


def _raise_for_status(response: httpx.Response, path: str) -> None:
    if response.status_code < 400:
        return
    message = f"{response.request.url} answered {response.status_code}: {response.text[:500]}"
    if response.status_code >= 500:
        raise _ServerError(message)
    raise BackendRequestError(message + f" (check the model name and the {path} request fields)")


def _result(text: str, usage: dict | None, latency_s: float, ttft_s, choice: dict, path: str) -> GenResult:
    if not usage or "prompt_tokens" not in usage or "completion_tokens" not in usage:
        raise BackendRequestError(
            f"{path}: the server sent no `usage` token counts; energy per token needs them "
            "(for streaming, the server must honour stream_options.include_usage, or set backend.stream=false)"
        )
    finish = choice.get("finish_reason") or "length"
    return GenResult(text, int(usage["prompt_tokens"]), int(usage["completion_tokens"]), latency_s, ttft_s, finish)
