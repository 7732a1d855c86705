"""A small OpenAI-compatible server over any Backend (``/v1/completions``, ``/v1/chat/completions``).

Generation is greedy whatever ``temperature`` the client sends, and requests are served
one at a time (a lock): in-process backends are not thread-safe, and serial service makes
the server's answers identical to the backend's own. Streaming is supported in form: the
whole answer arrives as one chunk, then a usage chunk. ``/metrics`` counts the tokens served
(Prometheus text, like vLLM's ``vllm:generation_tokens_total``): ``jouleroute_serve_generation_tokens_total``
and ``jouleroute_serve_prompt_tokens_total``, counted before the answer is sent.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from typing import Iterator

from fastapi import FastAPI, HTTPException
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict

from jouleroute.backends.base import Backend, GenRequest, GenResult

logger = logging.getLogger(__name__)


class _Body(BaseModel):
    # OpenAI clients send many optional fields (top_p, n, user, ...); accept and ignore them.
    model_config = ConfigDict(extra="allow")
    model: str
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict | None = None


class CompletionBody(_Body):
    prompt: str


class ChatBody(_Body):
    messages: list[dict]


def create_app(backend: Backend, served_name: str, default_max_tokens: int = 256) -> FastAPI:
    """An app serving ``backend`` under the model name ``served_name``."""
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    app = FastAPI(title="jouleroute OpenAI-compatible server")
    lock = threading.Lock()
    registry = CollectorRegistry()
    generated = Counter("jouleroute_serve_generation_tokens", "Tokens generated", registry=registry)
    prompted = Counter("jouleroute_serve_prompt_tokens", "Prompt tokens read", registry=registry)

    def run(body: _Body, prompt: str | None, messages: list[dict] | None) -> GenResult:
        if body.model != served_name:
            raise HTTPException(404, f"model '{body.model}' is not served here; this server has '{served_name}'")
        stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
        max_tokens = body.max_completion_tokens or body.max_tokens or default_max_tokens
        try:
            request = GenRequest(prompt=prompt, messages=messages, max_new_tokens=max_tokens, stop=stop)
        except ValueError as error:
            raise HTTPException(400, str(error)) from error
        with lock:
            try:
                result = backend.generate([request])[0]
                generated.inc(result.output_tokens)
                prompted.inc(result.input_tokens)
                return result
            except Exception as error:  # a failed generation is the server's fault: 500, keep serving
                logger.exception("generation failed")
                raise HTTPException(500, f"generation failed: {error}") from error

    def reply(body: _Body, result: GenResult, kind: str) -> dict | StreamingResponse:
        ident = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:16]}"
        usage = {
            "prompt_tokens": result.input_tokens,
            "completion_tokens": result.output_tokens,
            "total_tokens": result.input_tokens + result.output_tokens,
        }
        base = {"id": ident, "created": int(time.time()), "model": served_name}
        if kind == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": result.text}}
            delta = {"index": 0, "delta": {"role": "assistant", "content": result.text}}
            obj, chunk_obj = "chat.completion", "chat.completion.chunk"
        else:
            choice = {"index": 0, "text": result.text, "logprobs": None}
            delta = {"index": 0, "text": result.text, "logprobs": None}
            obj, chunk_obj = "text_completion", "text_completion"
        if not body.stream:
            return base | {"object": obj, "choices": [choice | {"finish_reason": result.finish_reason}], "usage": usage}
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        events = _sse(base | {"object": chunk_obj}, delta, result, usage, include_usage)
        return StreamingResponse(events, media_type="text/event-stream")

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    @app.get("/metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    def list_models() -> dict:
        return {"object": "list", "data": [{"id": served_name, "object": "model", "owned_by": "jouleroute"}]}

    @app.post("/v1/completions")
    def completions(body: CompletionBody):
        return reply(body, run(body, body.prompt, None), "completion")

    @app.post("/v1/chat/completions")
    def chat_completions(body: ChatBody):
        return reply(body, run(body, None, body.messages), "chat")

    return app


def _sse(base: dict, delta: dict, result: GenResult, usage: dict, include_usage: bool) -> Iterator[str]:
    yield f"data: {json.dumps(base | {'choices': [delta | {'finish_reason': None}]})}\n\n"
    final = {k: v for k, v in delta.items() if k == "index"}
    final |= {"delta": {}} if "delta" in delta else {"text": ""}
    yield f"data: {json.dumps(base | {'choices': [final | {'finish_reason': result.finish_reason}]})}\n\n"
    if include_usage:
        yield f"data: {json.dumps(base | {'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


class ServerThread:
    """Run an app with uvicorn in a background thread on loopback: ``with ServerThread(app) as url``.

    Port 0 lets the OS pick a free port; ``url`` is the ``/v1`` root for the openai backend.
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="jouleroute-serve", daemon=True)
        self.host = host

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the OpenAI-compatible server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://{self.host}:{port}/v1"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
