"""An OpenAI-compatible upstream that misbehaves on purpose, for the gateway's fault tests: a raw Starlette app whose
path names how it answers, so one loopback server plays every fault (``RemoteUpstream(..., url + "/<how>/v1")``).

``ok`` answers (``n`` choices, streamed or not); ``slow`` answers after ``SLOW_S``; ``listbody`` answers a JSON list;
``nullusage`` gives null token counts; ``garbage`` streams a line that is not JSON first; ``midjunk`` streams text,
then a line that is not JSON; ``status<code>`` answers that status with an OpenAI error body."""

from __future__ import annotations

import asyncio
import json

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

SLOW_S = 3.0  # longer than /readyz's 2 s probe timeout


def _body(kind: str, n: int) -> dict:
    choices = [{"index": i, "finish_reason": "stop"} | ({"message": {"role": "assistant", "content": f"answer {i}"}}
                                                        if kind == "chat" else {"text": f"answer {i}"})
               for i in range(n)]
    return {"id": "raw", "object": "chat.completion", "created": 1, "model": "raw", "choices": choices,
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def _events(kind: str, n: int, how: str):
    base = {"id": "raw", "object": "chat.completion.chunk", "created": 1, "model": "raw"}

    def line(chunk: dict) -> bytes:
        return f"data: {json.dumps(base | chunk)}\n\n".encode()

    def piece(i: int, text: str | None, finish: str | None) -> dict:
        part = {"delta": {"content": text} if text else {}} if kind == "chat" else {"text": text or ""}
        return {"index": i, "finish_reason": finish} | part

    async def events():
        if how == "garbage":
            yield b"data: {not json\n\n"
            return
        for i in range(n):
            yield line({"choices": [piece(i, f"answer {i}", None)]})
        if how == "midjunk":
            yield b"data: {oops\n\n"
            return
        for i in range(n):
            yield line({"choices": [piece(i, None, "stop")]})
        usage = {"prompt_tokens": None if how == "nullusage" else 3, "completion_tokens": 2, "total_tokens": 5}
        yield line({"choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"

    return events()


async def _complete(request: Request):
    how, body = request.path_params["how"], await request.json()
    kind, n = ("chat" if "messages" in body else "completion"), body.get("n", 1)
    if how.startswith("status"):
        return JSONResponse({"error": {"message": f"the upstream says {how[6:]}"}}, int(how[6:]))
    if how == "slow":
        await asyncio.sleep(SLOW_S)
    if how == "listbody":
        return JSONResponse([1, 2])
    if body.get("stream"):
        return StreamingResponse(_events(kind, n, how), media_type="text/event-stream")
    answer = _body(kind, n)
    if how == "nullusage":
        answer["usage"]["prompt_tokens"] = None
    return JSONResponse(answer)


async def _models(request: Request):
    return JSONResponse({"object": "list", "data": [{"id": "raw"}]})


def raw_upstream() -> Starlette:
    return Starlette(routes=[Route("/{how}/v1/chat/completions", _complete, methods=["POST"]),
                             Route("/{how}/v1/completions", _complete, methods=["POST"]),
                             Route("/{how}/v1/models", _models)])
