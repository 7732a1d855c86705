"""The processes of benchmarks/bench_faults.py, each started as that script with a hidden ``--role``: a scripted
OpenAI-compatible upstream (bench_capture.py and bench_reload.py start it too) and the router-mode gateway."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

CANDIDATES = ("small", "large")
FAULTS_SCRIPT = str(Path(__file__).resolve().with_name("bench_faults.py"))  # what start() runs unless told


def run_upstream(name: str, port: int, tokens: int, token_ms: float) -> None:
    """An OpenAI-compatible completions server that streams ``tokens`` tokens ``token_ms`` apart (async: never
    queued), with the usage chunk the gateway asks for; not streaming, the whole answer after the same time."""
    from aiohttp import web

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompt = str(body.get("prompt", ""))
        words = [f" {name}{i}" for i in range(tokens)]
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": tokens,
                 "total_tokens": len(prompt.split()) + tokens}
        base = {"id": "cmpl-1", "object": "text_completion", "created": int(time.time()), "model": body["model"]}
        if not body.get("stream"):
            await asyncio.sleep(tokens * token_ms / 1000)
            choice = {"index": 0, "text": "".join(words), "logprobs": None, "finish_reason": "length"}
            return web.json_response(base | {"choices": [choice], "usage": usage})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for word in words:
            await asyncio.sleep(token_ms / 1000)
            chunk = base | {"choices": [{"index": 0, "text": word, "logprobs": None, "finish_reason": None}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        last = base | {"choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "length"}]}
        await response.write(f"data: {json.dumps(last)}\n\n".encode())
        if (body.get("stream_options") or {}).get("include_usage"):
            await response.write(f"data: {json.dumps(base | {'choices': [], 'usage': usage})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"}]})

    app = web.Application()
    app.add_routes([web.post("/v1/completions", completions), web.get("/v1/models", models)])
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def run_gateway(targets: dict[str, str], port: int, log_file: str, timeout_s: float) -> None:
    """The router-mode gateway: kNN (bench_gateway's synthetic profile), fallback on, access log to a file."""
    import logging

    import uvicorn

    from bench_gateway import build_router
    from jouleroute.gateway.app import create_app
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.energy import ExpectedEnergy
    from jouleroute.gateway.remote import RemoteUpstream
    from jouleroute.gateway.service import Gateway

    access = logging.getLogger("jouleroute.gateway.access")
    access.addHandler(logging.FileHandler(log_file))
    access.setLevel(logging.INFO)
    access.propagate = False
    router = build_router("knn", Path("."))
    upstreams = {c: RemoteUpstream(c, url, c, ExpectedEnergy({}, 0.1), timeout_s=timeout_s, concurrency=256)
                 for c, url in targets.items()}
    cfg = GatewayConfig.model_validate({"fallback": True, "auth": {"keys_env": None},
                                        "limits": {"rate_per_minute": 1e9, "burst": 10**6, "max_pending": 10_000}})
    uvicorn.run(create_app(Gateway(cfg, router, upstreams)), host="127.0.0.1", port=port, log_level="warning",
                access_log=False, timeout_keep_alive=30, timeout_graceful_shutdown=5)


def wait_all_ready(upstreams: dict[str, subprocess.Popen], targets: dict[str, str], gateway: subprocess.Popen,
                   gateway_port: int) -> str:
    """Wait for every upstream's /models, then the gateway's /readyz; the gateway's base URL."""
    from bench_gateway import wait_ready

    for name, proc in upstreams.items():
        wait_ready(targets[name] + "/models", proc)
    base = f"http://127.0.0.1:{gateway_port}"
    wait_ready(base + "/readyz", gateway)
    return base


def start(args: list[str], log: Path, script: str = FAULTS_SCRIPT) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, script, *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=os.environ | {"TOKENIZERS_PARALLELISM": "false"})
