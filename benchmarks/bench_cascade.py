"""The gateway's cascade mode under a sustained load on loopback: what the gateway adds beyond the upstream calls.

Three upstream processes answer chat completions from a script after a simulated generation time (async, so
they never queue): ``a`` and ``b`` (stage 1, ``--stage1-ms`` each) agree on ``--agree`` of the questions, and
``c`` (stage 2, ``--stage2-ms``) answers the rest. A gateway process serves the chain ``[[a, b], [c]]``
(gateway/cascade.py, access log on, in a file), and, in one run:

1. ``--requests`` chat requests go to ``jouleroute-auto`` open loop at ``--rate`` per second (each leaves at
   its time, whatever is in flight);
2. the same requests follow the same chain straight to the upstreams (each stage's members in parallel,
   stage after stage, as the gateway took it for that request), at the same rate.

The gateway's own added latency is measured two ways: per request, its latency minus the sum over the stages
it asked of the slowest call (the calls' times as the gateway saw them, ``usage.jouleroute.cascade``); and
p95(through the gateway) - p95(the client following the chain itself). Target: 0 errors and an added p95 <= 50
ms at 20 requests/s on 2 cores (``taskset -c 0,1``). Also: the share of requests stopped at each stage, whether
every response's total joules equal the sum of its calls', and the gateway's CPU per request. Writes
results/cascade_gateway.json.

    taskset -c 0,1 .venv/bin/python benchmarks/bench_cascade.py [--rate 20] [--requests 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CHAIN = [["a", "b"], ["c"]]
QUESTION = "Q{i}: Natalia sold clips to {i} of her friends in April, and then she sold half as many in May. " \
           "How many clips did Natalia sell altogether in April and May?"


def reply(role: str, i: int, agree: float) -> str:
    """The script: ``a`` and ``b`` agree (i and i.0) on the first ``agree`` of every 20 questions."""
    if role == "a":
        return f"She sold {i} and then half as many. The answer is {i}."
    if role == "b":
        return f"{i} clips in April.\n#### {i}.0" if (i % 20) < 20 * agree else f"The answer is {i + 1}."
    return f"In all she sold \\boxed{{{i}}} clips."


def run_upstream(role: str, port: int, delay_s: float, agree: float) -> None:
    """A minimal OpenAI-compatible chat server: the script's reply after ``delay_s`` (+-20 %), never queued. The
    jitter is drawn from the role and the question, so both phases see the same upstream time per request."""
    from aiohttp import web

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        text = body["messages"][-1]["content"]
        i = int(re.search(r"Q(\d+)", text).group(1))
        await asyncio.sleep(delay_s * random.Random(f"{role}-{i}").uniform(0.8, 1.2))
        answer = reply(role, i, agree)
        usage = {"prompt_tokens": len(text.split()), "completion_tokens": len(answer.split()),
                 "total_tokens": len(text.split()) + len(answer.split())}
        choice = {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
        return web.json_response({"id": f"chatcmpl-{i}", "object": "chat.completion", "created": int(time.time()),
                                  "model": body["model"], "choices": [choice], "usage": usage})

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": role, "object": "model"}]})

    app = web.Application()
    app.add_routes([web.post("/v1/chat/completions", chat), web.get("/v1/models", models)])
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def run_gateway(targets: dict[str, str], port: int, log_file: str) -> None:
    import logging

    import uvicorn

    from jouleroute.gateway.app import create_app
    from jouleroute.cascade.chain import Chain
    from jouleroute.gateway.cascade import CascadeGateway
    from jouleroute.gateway.config import GatewayConfig
    from jouleroute.gateway.energy import Expected, ExpectedEnergy
    from jouleroute.gateway.remote import RemoteUpstream

    logging.basicConfig(filename=log_file, level=logging.INFO)  # the access log is part of the gateway's cost
    expected = ExpectedEnergy({"a": Expected(0.01, "estimated"), "b": Expected(0.02, "estimated"),
                               "c": Expected(0.5, "estimated")}, 0.1)
    upstreams = {c: RemoteUpstream(c, url, c, expected, concurrency=256) for c, url in targets.items()}
    cfg = GatewayConfig.model_validate({"router": {"kind": "cascade", "chain": "bench"}, "auth": {"keys_env": None},
                                        "limits": {"rate_per_minute": 1e9, "burst": 10**6, "max_pending": 10_000}})
    gateway = CascadeGateway(cfg, Chain(tuple(map(tuple, CHAIN))), upstreams)
    uvicorn.run(create_app(gateway), host="127.0.0.1", port=port, log_level="warning", access_log=False,
                timeout_keep_alive=30, timeout_graceful_shutdown=5)


def start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=log.open("w"), stderr=subprocess.STDOUT)


def chat(model: str, i: int) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": QUESTION.format(i=i)}], "max_tokens": 64}


async def follow_chains(targets: dict[str, str], chains: list[list[list[str]]],
                        rate: float) -> tuple[list[dict], float]:
    """The client doing the cascade itself: request i's stages, in order, each stage's members in parallel."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2.0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:
        async def post(candidate: str, i: int) -> int:
            async with session.post(targets[candidate] + "/chat/completions", json=chat(candidate, i)) as r:
                await r.read()
                return r.status

        async def one(i: int, stages: list[list[str]]) -> dict:
            await asyncio.sleep(max(0.0, began + i / rate - time.perf_counter()))
            sent = time.perf_counter()
            status = 200
            try:
                for stage in stages:
                    codes = await asyncio.gather(*(post(c, i) for c in stage))
                    status = max(codes)
                error = None if status == 200 else f"HTTP {status}"
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                status, error = None, f"{type(exc).__name__}: {exc}"
            done = time.perf_counter()
            return {"status": status, "error": error, "latency_s": done - sent, "done_at": done}

        began = time.perf_counter()
        records = await asyncio.gather(*(one(i, s) for i, s in enumerate(chains)))
        return records, time.perf_counter() - began


def pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 4) if values else None


def gateway_own(record: dict) -> float | None:
    """A request's latency minus the sum over its stages of the slowest call, as the gateway timed the calls."""
    calls = (record["usage"].get("cascade") or {}).get("calls")
    if not calls:
        return None
    slowest: dict[int, float] = {}
    for c in calls:
        slowest[c["stage"]] = max(slowest.get(c["stage"], 0.0), c["latency_s"])
    return record["latency_s"] - sum(slowest.values())


def joules_mismatches(records: list[dict]) -> int:
    """Responses whose total joules are not the sum of their calls' (exactly, in the JSON usage)."""
    bad = 0
    for r in records:
        u = r["usage"]
        if r["status"] == 200 and u.get("energy_j") != sum(c["energy_j"] for c in u["cascade"]["calls"]):
            bad += 1
    return bad


def bench(args, work: Path) -> dict:
    # bench_gateway's process and load helpers (imported here: it imports torch, which the servers never need)
    from bench_gateway import cpu_s, fire, free_port, stop, summary, wait_ready

    procs, targets = [], {}
    delays = {"a": args.stage1_ms / 1000, "b": args.stage1_ms / 1000, "c": args.stage2_ms / 1000}
    for role in ("a", "b", "c"):
        port = free_port()
        targets[role] = f"http://127.0.0.1:{port}/v1"
        procs.append(start(["--role", "upstream", "--name", role, "--port", str(port), "--delay", str(delays[role]),
                            "--agree", str(args.agree)], work / f"upstream-{role}.out"))
    gw_port = free_port()
    gateway = start(["--role", "gateway", "--targets", json.dumps(targets), "--port", str(gw_port),
                     "--log", str(work / "access.log")], work / "gateway.out")
    try:
        for role, proc in zip(targets, procs):
            wait_ready(targets[role] + "/models", proc)
        base = f"http://127.0.0.1:{gw_port}"
        wait_ready(base + "/readyz", gateway)
        url = base + "/v1/chat/completions"
        asyncio.run(fire([(url, chat("jouleroute-auto", 10_000 + i), {}) for i in range(10)], 10))  # warm
        jobs = [(url, chat("jouleroute-auto", i), {}) for i in range(args.requests)]
        cpu = cpu_s(gateway.pid)
        via, via_wall = asyncio.run(fire(jobs, args.requests, args.rate))
        cpu = cpu_s(gateway.pid) - cpu
        chains = [(r["usage"].get("cascade") or {}).get("stages") or CHAIN for r in via]
        direct, direct_wall = asyncio.run(follow_chains(targets, chains, args.rate))
    finally:
        for proc in (gateway, *procs):
            stop(proc)
    g, d = summary(via, via_wall), summary(direct, direct_wall)
    own = [x for x in (gateway_own(r) for r in via if r["status"] == 200) if x is not None]
    stops = Counter(r["headers"].get("x-jouleroute-cascade-stop") for r in via if r["status"] == 200)
    added = round(g["p95_s"] - d["p95_s"], 4) if g["p95_s"] is not None and d["p95_s"] is not None else None
    return {"gateway": g, "direct": d, "gateway_own_p50_s": pct(own, 50), "gateway_own_p95_s": pct(own, 95),
            "gateway_own_max_s": round(max(own), 4) if own else None, "added_p95_vs_direct_s": added,
            "stop_share": {f"stage{k}": round(v / max(len(via), 1), 4) for k, v in sorted(stops.items())},
            "joules_total_not_sum_of_calls": joules_mismatches(via),
            "gateway_cpu_ms_per_request": round(1000 * cpu / args.requests, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second, open loop")
    parser.add_argument("--stage1-ms", type=float, default=50.0, help="simulated generation time of a and b")
    parser.add_argument("--stage2-ms", type=float, default=200.0, help="simulated generation time of c")
    parser.add_argument("--agree", type=float, default=0.7, help="share of questions on which a and b agree")
    parser.add_argument("--result", default="cascade_gateway", help="results/RESULT.json")
    parser.add_argument("--role", choices=["upstream", "gateway"], help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--delay", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--targets", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "upstream":
        return run_upstream(args.name, args.port, args.delay, args.agree)
    if args.role == "gateway":
        return run_gateway(json.loads(args.targets), args.port, args.log)

    from _common import conditions, write_result

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a `timeout` still stops the server processes
    cond = conditions()
    with tempfile.TemporaryDirectory() as tmp:
        result = bench(args, Path(tmp))
    target_s = 0.05
    result |= {"requests": args.requests, "offered_rate_rps": args.rate, "chain": CHAIN, "agree_share": args.agree,
               "upstream_ms": {"a": args.stage1_ms, "b": args.stage1_ms, "c": args.stage2_ms},
               "upstreams": "3 x aiohttp scripted chat servers (simulated generation time, +-20 %), loopback",
               "target": {"errors": 0, "gateway_own_p95_s": f"<= {target_s}",
                          "added_p95_vs_direct_s": f"<= {target_s}"},
               "target_met": bool(result["gateway"]["errors"] == 0 and result["gateway_own_p95_s"] is not None
                                  and result["gateway_own_p95_s"] <= target_s
                                  and result["added_p95_vs_direct_s"] is not None
                                  and result["added_p95_vs_direct_s"] <= target_s),
               "conditions": cond}
    print(json.dumps({k: v for k, v in result.items() if k != "conditions"}, indent=1))
    print(f"wrote {write_result(args.result, result)}")


if __name__ == "__main__":
    main()
