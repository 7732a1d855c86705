"""Cascade mode of benchmarks/bench_faults.py: bench_cascade.py's three scripted upstreams behind the cascade
gateway, the stage-1 upstream ``a`` killed under open-loop load."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

from faults_client import get_text, metric_sum, records_check, send
from faults_processes import start, wait_all_ready


def bench_cascade(args, work: Path) -> dict:
    import aiohttp

    import bench_cascade as bc
    from bench_gateway import free_port, stop

    script = str(Path(bc.__file__).resolve())
    targets, procs = {}, {}
    delays = {"a": args.stage1_ms / 1000, "b": args.stage1_ms / 1000, "c": args.stage2_ms / 1000}
    for role in ("a", "b", "c"):
        port = free_port()
        targets[role] = f"http://127.0.0.1:{port}/v1"
        procs[role] = start(["--role", "upstream", "--name", role, "--port", str(port), "--delay",
                             str(delays[role]), "--agree", str(args.agree)], work / f"cascade-{role}.out", script)
    gw_port, log = free_port(), work / "cascade-access.log"
    gateway = start(["--role", "gateway", "--targets", json.dumps(targets), "--port", str(gw_port),
                     "--log", str(log)], work / "cascade-gateway.out", script)
    try:
        base = wait_all_ready(procs, targets, gateway, gw_port)
        url = base + "/v1/chat/completions"

        async def load() -> tuple[list[dict], float, float]:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2.0)
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as s:
                async def one(i: int) -> dict:
                    await asyncio.sleep(max(0.0, began + i / args.rate - time.perf_counter()))
                    body = bc.chat("jouleroute-auto", i) | {"stream": i % 2 == 1}
                    record = await send(s, url, body, {}, 150.0)
                    record["sent_at"] = record["ended_at"] - record["latency_s"] - began
                    return record

                async def killer() -> float:
                    await asyncio.sleep(args.cascade_kill_after)
                    os.kill(procs["a"].pid, signal.SIGKILL)
                    return time.perf_counter() - began

                began = time.perf_counter()
                kill = asyncio.create_task(killer())
                records = await asyncio.gather(*(one(i) for i in range(args.cascade_requests)))
                return records, time.perf_counter() - began, await kill

        records, wall, killed_at = asyncio.run(load())
        metrics = get_text(base + "/metrics")
    finally:
        for proc in (gateway, *procs.values()):
            stop(proc)
    lost = [r for r in records if not (r["status"] == 200 and not r["hang"] and r["transport"] is None
                                       and r["error_event"] is None and (r["done"] or not r["stream"]))]
    escalations: Counter = Counter()
    stops: dict[str, Counter] = {"before_kill": Counter(), "after_kill": Counter()}
    for r in records:
        reasons = r["headers"].get("x-jouleroute-cascade-reasons", "")
        for stage, reason in enumerate(reasons.split(",")[:-1], 1) if reasons else ():
            escalations[f"stage{stage}:{reason}"] += 1
        if r["status"] == 200:
            when = "before_kill" if r["sent_at"] + r["latency_s"] < killed_at else "after_kill"
            stops[when][f"stage{r['headers'].get('x-jouleroute-cascade-stop')}"] += 1
    failed_a = sum(1 for r in records if "a=failed" in r["headers"].get("x-jouleroute-cascade-energy-source", ""))
    metric_escalations = {reason: metric_sum(metrics, "jouleroute_gateway_cascade_escalations_total", stage="1",
                                             reason=reason)
                          for reason in ("disagree", "too_few_answers", "no_answer", "too_long")}
    return {
        "requests": args.cascade_requests, "offered_rate_rps": args.rate, "chain": bc.CHAIN, "victim": "a (stage 1)",
        "fault": "kill", "fault_at_s": round(killed_at, 3), "wall_s": round(wall, 3),
        "answered": len(records) - len(lost), "lost": len(lost),
        "lost_examples": [(r["status"], (r["body"] or r["error_event"] or r["transport"] or "")[:200])
                          for r in lost[:5]],
        "hangs": sum(r["hang"] for r in records),
        "escalations": dict(escalations), "escalations_total": sum(escalations.values()),
        "escalations_metric": {k: v for k, v in metric_escalations.items() if v},
        "escalations_agree_with_metric": sum(escalations.values()) == sum(metric_escalations.values()),
        "stops": {k: dict(v) for k, v in stops.items()},
        "calls_to_victim_failed": failed_a,
        "latency_max_s": round(max(r["latency_s"] for r in records), 3),
        "records": records_check(log, [r["headers"].get("x-request-id") for r in records], args.cascade_requests),
        "met": not lost and sum(escalations.values()) == sum(metric_escalations.values()),
    }
