"""Router mode of benchmarks/bench_faults.py: two scripted upstreams behind the router-mode gateway, one killed or
frozen under load, every request classified."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

from faults_client import classify, get_text, metric_sum, records_check, send
from faults_processes import CANDIDATES, start, wait_all_ready


def bench_router(args, fault: str, work: Path) -> dict:
    import aiohttp

    from bench_gateway import free_port, stop

    targets, procs = {}, {}
    for name in CANDIDATES:
        port = free_port()
        targets[name] = f"http://127.0.0.1:{port}/v1"
        procs[name] = start(["--role", "upstream", "--name", name, "--port", str(port), "--tokens",
                             str(args.tokens), "--token-ms", str(args.token_ms)], work / f"upstream-{name}.out")
    gw_port, log = free_port(), work / f"access-{fault}.log"
    gateway = start(["--role", "gateway", "--targets", json.dumps(targets), "--port", str(gw_port), "--log", str(log),
                     "--timeout", str(args.timeout)], work / f"gateway-{fault}.out")
    answer_s = args.tokens * args.token_ms / 1000
    limit_s = len(CANDIDATES) * args.timeout + answer_s + 10  # past this a request has hung
    victim = procs[args.victim]
    try:
        base = wait_all_ready(procs, targets, gateway, gw_port)
        url = base + "/v1/completions"

        async def load() -> tuple[list[dict], float, dict]:
            gate = asyncio.Semaphore(args.concurrency)
            connector = aiohttp.TCPConnector(limit=args.concurrency, keepalive_timeout=2.0)
            at_kill: dict = {}
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as s:
                async def one(i: int) -> dict:
                    body = {"model": "jouleroute-auto", "prompt": f"question {i} about topic {i % 4} and number "
                            f"{3 * i}", "max_tokens": args.tokens, "stream": (i // 2) % 2 == 1}
                    # streaming by i // 2, not i: the router's choice follows i's parity (the synthetic profile)
                    async with gate:
                        return await send(s, url, body, {"X-Energy-Weight": f"{2 * (i % 5) / 4:g}"}, limit_s)

                async def killer() -> None:
                    await asyncio.sleep(args.kill_after)
                    at_kill["t"] = time.perf_counter() - began
                    os.kill(victim.pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)

                began = time.perf_counter()
                kill = asyncio.create_task(killer())
                records = await asyncio.gather(*(one(i) for i in range(args.requests)))
                await kill
                return records, time.perf_counter() - began, at_kill

        records, wall, at_kill = asyncio.run(load())
        metrics = get_text(base + "/metrics")
    finally:
        if fault == "freeze" and victim.poll() is None:
            os.kill(victim.pid, signal.SIGCONT)
        for proc in (gateway, *procs.values()):
            stop(proc)
    classes = {kind: Counter() for kind in ("streaming", "non_streaming")}
    latency_max = Counter()
    examples: dict[str, str] = {}
    for r in records:
        c = classify(r, args.victim)
        classes["streaming" if r["stream"] else "non_streaming"][c] += 1
        latency_max[c] = max(latency_max[c], round(r["latency_s"], 3))
        if c in ("other", "clean_error") and c + str(r["stream"]) not in examples:
            examples[c + str(r["stream"])] = (r["error_event"] or r["body"] or r["transport"] or "")[:300]
    total = sum(classes.values(), Counter())
    # who answered (or was last tried), by kind: the router must have sent both kinds to the victim
    picked = {kind: dict(Counter(r["headers"].get("x-jouleroute-fallback-from") or r["headers"].get(
        "x-jouleroute-candidate") or "none" for r in records if r["stream"] == (kind == "streaming")))
        for kind in ("streaming", "non_streaming")}
    killed_mid_stream = sum(1 for r in records if r["stream"] and r["error_event"] and r["content"])
    return {
        "fault": fault, "victim": args.victim, "requests": args.requests, "concurrency": args.concurrency,
        "fault_at_s": round(at_kill.get("t", float("nan")), 3), "wall_s": round(wall, 3),
        "classes": {k: dict(v) for k, v in classes.items()}, "total": dict(total), "routed_to": picked,
        "hangs": total["hang"], "other": total["other"],
        "streams_cut_mid_answer": killed_mid_stream,
        "latency_max_s_by_class": dict(latency_max), "client_limit_s": limit_s,
        "upstream_timeout_s": args.timeout, "answer_s": answer_s,
        "records": records_check(log, [r["headers"].get("x-request-id") for r in records], args.requests),
        "gateway_fallbacks_metric": metric_sum(metrics, "jouleroute_gateway_fallbacks_total"),
        "examples": examples,
        "met": total["hang"] == 0 and total["other"] == 0,
    }
