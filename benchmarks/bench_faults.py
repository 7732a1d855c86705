"""Faults under load on loopback: what every request gets while an upstream process dies (or freezes).

**Router mode** (``--part router``). Two upstream processes, ``small`` and ``large``, answer completions from a
script, token by token (``--tokens`` tokens, ``--token-ms`` apart: a stream is in flight for a while) or, not
streaming, whole after the same time. A gateway process (``jouleroute.gateway``: the kNN router on a synthetic
profile as in bench_gateway.py, ``fallback: true``, each upstream's ``timeout_s`` = ``--timeout``) stands in front.
``--requests`` requests, half of them streaming, go to ``jouleroute-auto`` with ``--concurrency`` in flight, the
energy weight cycling so the router picks both candidates; ``--kill-after`` seconds in, the upstream ``--victim``
gets SIGKILL (``--fault kill``) or SIGSTOP (``--fault freeze``: its connections stay open and say nothing, so
only the timeouts end them). Every request is put in one class:

- ``answered``: 200 and the whole answer (a stream ends with ``[DONE]``), with no fallback;
- ``fallback``: 200 and the whole answer from the other candidate, ``X-Jouleroute-Fallback-From`` naming the victim;
- ``clean_error``: a 502/504 whose message names the victim, or a stream (already answering when the victim died,
  so it cannot fall back) that ends with an error event naming it;
- ``hang``: no end within the client's limit (every candidate's ``timeout_s`` plus the answer's time plus 10 s);
- ``other``: anything else (a 5xx that names no upstream, a stream cut without an error event, a truncated body).

The gateway's access log must hold one line per request (``records``: missing and duplicated request ids).

**Cascade mode** (``--part cascade``). bench_cascade.py's three scripted upstreams and chain ``[[a, b], [c]]``,
requests open loop at ``--rate`` per second; ``--cascade-kill-after`` seconds in, ``a`` (stage 1) gets SIGKILL. Counted:
answered, lost (anything but a 200 with an answer), escalations by reason (from ``X-Jouleroute-Cascade-Reasons``;
checked against the gateway's ``/metrics``), calls that failed, and the access log's records.

Targets (issue 50): 0 hangs, 0 ``other``, 0 lost, 0 missing or duplicated records. Writes results/faults.json
(both parts; ``--part`` reruns one and keeps the other's record).

    .venv/bin/python benchmarks/bench_faults.py [--part router cascade] [--fault kill freeze]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CANDIDATES = ("small", "large")


# --- the processes -------------------------------------------------------------------------------

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


def start(args: list[str], log: Path, script: str = __file__) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, script, *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=os.environ | {"TOKENIZERS_PARALLELISM": "false"})


# --- the client ----------------------------------------------------------------------------------

async def send(session, url: str, body: dict, headers: dict, limit_s: float) -> dict:
    """One request, read to its end: status, headers, and for a stream what arrived (content, [DONE], an error
    event); ``hang`` when it has not ended within ``limit_s``."""
    import aiohttp

    record = {"stream": bool(body.get("stream")), "status": None, "headers": {}, "content": False, "done": False,
              "error_event": None, "body": None, "transport": None, "hang": False}
    sent = time.perf_counter()
    try:
        async with asyncio.timeout(limit_s):
            async with session.post(url, json=body, headers=headers) as r:
                record["status"], record["headers"] = r.status, {k.lower(): v for k, v in r.headers.items()}
                if r.status != 200 or not record["stream"]:
                    record["body"] = await r.text()
                else:
                    async for raw in r.content:
                        line = raw.decode().strip()
                        if not line.startswith("data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == "[DONE]":
                            record["done"] = True
                            continue
                        event = json.loads(payload)
                        if "error" in event:
                            record["error_event"] = event["error"].get("message", "")
                        elif any(c.get("text") or (c.get("delta") or {}).get("content")
                                 for c in event.get("choices") or []):
                            record["content"] = True
    except TimeoutError:
        record["hang"] = True
    except (aiohttp.ClientError, ValueError) as error:
        record["transport"] = f"{type(error).__name__}: {error}"
    record["latency_s"] = time.perf_counter() - sent
    record["ended_at"] = time.perf_counter()
    return record


def classify(r: dict, victim: str) -> str:
    named = f"'{victim}' at http://"  # how the gateway names an upstream (RemoteUpstream.where)
    if r["hang"]:
        return "hang"
    if r["transport"] is not None:
        return "other"
    if r["status"] == 200:
        if r["stream"]:
            if r["error_event"] is not None:
                return "clean_error" if named in r["error_event"] else "other"
            if not (r["done"] and r["content"]):
                return "other"
        else:
            try:
                body = json.loads(r["body"])
                text = body["choices"][0]["text"]
            except (ValueError, KeyError, IndexError, TypeError):
                return "other"
            if not text:
                return "other"
        fell = r["headers"].get("x-jouleroute-fallback-from")
        return "fallback" if fell == victim else "answered" if fell is None else "other"
    if r["status"] in (502, 504):
        try:
            message = json.loads(r["body"])["error"]["message"]
        except (ValueError, KeyError, TypeError):
            return "other"
        return "clean_error" if named in message else "other"
    return "other"


def records_check(log: Path, request_ids: list[str | None], sent: int) -> dict:
    """The access log against the requests: one line each, none twice."""
    # one JSON object a line, bare or behind logging.basicConfig's "INFO:jouleroute.gateway.access:" prefix
    lines = [json.loads(line[line.index("{"):]) for line in log.read_text().splitlines()
             if line.startswith("{") or line.startswith("INFO:jouleroute.gateway.access:{")]
    ids = Counter(line["request_id"] for line in lines if line["route"].startswith("/v1/"))
    seen = [i for i in request_ids if i]
    return {"requests": sent, "access_log_lines": sum(ids.values()),
            "duplicated": sum(n - 1 for n in ids.values() if n > 1),
            "missing": sent - len(ids), "responses_without_request_id": sent - len(seen),
            "response_ids_not_in_log": sum(1 for i in seen if i not in ids)}


# --- router mode ---------------------------------------------------------------------------------

def bench_router(args, fault: str, work: Path) -> dict:
    import aiohttp

    from bench_gateway import free_port, stop, wait_ready

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
        for name, proc in procs.items():
            wait_ready(targets[name] + "/models", proc)
        base = f"http://127.0.0.1:{gw_port}"
        wait_ready(base + "/readyz", gateway)
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
        metrics = _get(base + "/metrics")
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
        "gateway_fallbacks_metric": _metric_sum(metrics, "jouleroute_gateway_fallbacks_total"),
        "examples": examples,
        "met": total["hang"] == 0 and total["other"] == 0,
    }


def _get(url: str) -> str:
    import httpx

    return httpx.get(url, timeout=10).text


def _metric_sum(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


# --- cascade mode --------------------------------------------------------------------------------

def bench_cascade(args, work: Path) -> dict:
    import aiohttp

    import bench_cascade as bc
    from bench_gateway import free_port, stop, wait_ready

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
        for role, proc in procs.items():
            wait_ready(targets[role] + "/models", proc)
        base = f"http://127.0.0.1:{gw_port}"
        wait_ready(base + "/readyz", gateway)
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
        metrics = _get(base + "/metrics")
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
    metric_escalations = {reason: _metric_sum(metrics, "jouleroute_gateway_cascade_escalations_total", stage="1",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", nargs="+", default=["router", "cascade"], choices=["router", "cascade"])
    parser.add_argument("--fault", nargs="+", default=["kill", "freeze"], choices=["kill", "freeze"],
                        help="router mode: SIGKILL the victim, or SIGSTOP it (only timeouts end its requests)")
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=40, help="tokens per answer")
    parser.add_argument("--token-ms", type=float, default=50.0, help="ms between streamed tokens")
    parser.add_argument("--timeout", type=float, default=10.0, help="each upstream's timeout_s")
    parser.add_argument("--victim", default="large", choices=CANDIDATES)
    parser.add_argument("--kill-after", type=float, default=1.5,
                        help="router mode: seconds into the load (the first 200 answers are then mid-stream)")
    parser.add_argument("--cascade-kill-after", type=float, default=3.0, help="cascade mode: seconds into the load")
    parser.add_argument("--rate", type=float, default=20.0, help="cascade: requests per second, open loop")
    parser.add_argument("--cascade-requests", type=int, default=400)
    parser.add_argument("--stage1-ms", type=float, default=50.0)
    parser.add_argument("--stage2-ms", type=float, default=200.0)
    parser.add_argument("--agree", type=float, default=0.7)
    parser.add_argument("--role", choices=["upstream", "gateway"], help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--targets", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "upstream":
        return run_upstream(args.name, args.port, args.tokens, args.token_ms)
    if args.role == "gateway":
        return run_gateway(json.loads(args.targets), args.port, args.log, args.timeout)

    from _common import RESULTS, conditions, write_result

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a `timeout` still stops the server processes
    previous = RESULTS / "faults.json"
    result = json.loads(previous.read_text()) if previous.is_file() else {}
    cond = conditions()
    with tempfile.TemporaryDirectory() as tmp:
        if "router" in args.part:
            result["router"] = {}
            for fault in args.fault:
                print(f"[router, {fault}] {args.requests} requests, {args.concurrency} in flight ...", flush=True)
                result["router"][fault] = bench_router(args, fault, Path(tmp)) | {"conditions": cond}
                print(json.dumps(result["router"][fault], indent=1, default=str), flush=True)
        if "cascade" in args.part:
            print(f"[cascade] {args.cascade_requests} requests at {args.rate:g}/s ...", flush=True)
            result["cascade"] = bench_cascade(args, Path(tmp)) | {"conditions": cond}
            print(json.dumps(result["cascade"], indent=1, default=str), flush=True)
    result["conditions"] = cond
    result["targets"] = {"hangs": 0, "other": 0, "lost": 0, "records_missing_or_duplicated": 0}
    print(f"wrote {write_result('faults', result)}")


if __name__ == "__main__":
    main()
