"""The traffic and the servers of benchmarks/bench_loop.py (the loop run by hand, issue 49): the questions it asks,
the client that sends them (closed loop at a concurrency, or open loop at a rate), and the `serve-model` servers and
gateway it starts, each logging to a file."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import yaml

from bench_gateway import stop, wait_ready

ROOT = Path(__file__).resolve().parents[1]


class BenchError(RuntimeError):
    """The run cannot go on; the message says what to do (printed as one line)."""


# --- questions -------------------------------------------------------------------------------------

def questions(root: Path, seed: int, tasks: list[str] | None = None) -> list[dict]:
    """Every question of the embedded default's tasks that its prepare stage does not pick (its query table is
    rebuilt, so the exclusion holds with or without artifacts/prepare), interleaved task by task, seeded."""
    from jouleroute.benchmarks import get_task
    from jouleroute.benchmarks.prepare import build_queries
    from jouleroute.config import load_params

    params = load_params(root / "params.yaml")
    data_dir = params.paths.resolve("data_dir", root)
    if not data_dir.is_dir():
        raise BenchError(f"{data_dir}: no benchmark files; run `.venv/bin/jouleroute data fetch` (docs/data.md)")
    used = set(build_queries(params.prepare, data_dir).column("query_id").to_pylist())
    rng = random.Random(seed)
    per_task = []
    for name in tasks or params.prepare.samples:
        if name not in params.prepare.samples:
            raise BenchError(f"--tasks {name}: not a task of the embedded default ({', '.join(params.prepare.samples)})")
        task = get_task(name)
        docs = [d for d in task.load(data_dir) if d["query_id"] not in used]
        rng.shuffle(docs)
        per_task.append([{"task": name, "query_id": d["query_id"], "question": d["question"], "gold": d["gold"],
                          "choices": d["choices"]} for d in docs])
    mixed = []
    for i in range(max(len(docs) for docs in per_task)):
        mixed += [docs[i] for docs in per_task if i < len(docs)]
    return mixed


def body_of(q: dict, max_tokens: int) -> dict:
    """A completion, not a chat: the pool's gemma3-270m has no chat template, so its server refuses ``messages``
    (the capture keeps the prompt as the user turn either way)."""
    return {"model": "jouleroute-auto", "prompt": q["question"], "max_tokens": max_tokens, "task": q["task"]}


def score_of(q: dict, answer: str) -> float:
    """The served answer graded on gold by its task's grader: a user's verdict, as `POST /v1/feedback` takes it."""
    from jouleroute.benchmarks import get_task

    return float(get_task(q["task"]).grade(answer or "", q["gold"], q["choices"]).correct)


# --- the client ------------------------------------------------------------------------------------

async def _one(session, base: str, q: dict, max_tokens: int) -> dict:
    import aiohttp

    sent = time.perf_counter()
    out = {"task": q["task"], "status": None, "version": None, "candidate": None, "request_id": None,
           "outcome": "failed", "error": None, "latency_s": None, "sent_s": sent}
    try:
        async with session.post(f"{base}/v1/completions", json=body_of(q, max_tokens)) as r:
            raw = await r.read()
            out |= {"status": r.status, "version": r.headers.get("X-Jouleroute-Policy-Version"),
                    "candidate": r.headers.get("X-Jouleroute-Candidate"), "request_id": r.headers.get("X-Request-Id")}
            if r.status == 200:
                out["outcome"] = "answered"
                out["answer"] = json.loads(raw)["choices"][0].get("text") or ""
            else:
                out["error"] = raw[:200].decode("utf-8", "replace")
    except asyncio.TimeoutError:
        out |= {"outcome": "hang", "error": "no answer within the timeout"}
    except aiohttp.ClientError as error:
        out["error"] = f"{type(error).__name__}: {error}"
    out["latency_s"] = time.perf_counter() - sent
    return out


async def closed_loop(base: str, qs: list[dict], concurrency: int, max_tokens: int, timeout_s: float,
                   feedback: float, bar) -> tuple[list[dict], list[int]]:
    """``qs`` at ``concurrency`` at once; a ``feedback`` share of the answered ones scored. Results, feedback statuses."""
    import aiohttp

    gate = asyncio.Semaphore(concurrency)
    posted: list[int] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
        async def go(i: int, q: dict) -> dict:
            async with gate:
                out = await _one(session, base, q, max_tokens)
                if out["outcome"] == "answered" and int((i + 1) * feedback) > int(i * feedback):  # every 1/share-th
                    try:
                        async with session.post(f"{base}/v1/feedback", json={
                                "request_id": out["request_id"], "score": score_of(q, out.get("answer"))}) as r:
                            posted.append(r.status)
                    except (aiohttp.ClientError, asyncio.TimeoutError):
                        posted.append(0)
                bar.update(1)
                return out

        return list(await asyncio.gather(*(go(i, q) for i, q in enumerate(qs)))), posted


class OpenLoad:
    """Completions at a fixed rate (open loop: sent on schedule whether or not earlier ones answered), in a thread of
    its own, until ``stop``; each request ends by its answer, an error or the timeout (a hang)."""

    def __init__(self, base: str, qs, rate: float, timeout_s: float, max_tokens: int, bar) -> None:
        self.base, self.qs, self.rate, self.timeout_s, self.max_tokens, self.bar = base, qs, rate, timeout_s, max_tokens, bar
        self.results: list[dict] = []
        self.started = self.stopped = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self) -> "OpenLoad":
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def stop(self) -> list[dict]:
        self._stop.set()
        self._thread.join()
        return self.results

    async def _run(self) -> None:
        import aiohttp

        limits = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                                         connector=limits) as session:
            tasks, i, t0 = [], 0, time.perf_counter()
            while not self._stop.is_set():
                task = asyncio.create_task(_one(session, self.base, next(self.qs), self.max_tokens))
                task.add_done_callback(lambda _: self.bar.update(1))
                tasks.append(task)
                i += 1
                await asyncio.sleep(max(0.0, t0 + i / self.rate - time.perf_counter()))
            self.stopped = time.perf_counter()
            self.results = list(await asyncio.gather(*tasks))


def summary(results: list[dict], since: float | None = None) -> dict:
    import numpy as np

    answered = [r for r in results if r["outcome"] == "answered"]
    lat = [r["latency_s"] for r in answered]
    versions: dict[str, int] = {}
    for r in answered:
        versions[r["version"]] = versions.get(r["version"], 0) + 1
    failed = [r for r in results if r["outcome"] == "failed"]
    statuses: dict[str, int] = {}
    for r in failed:
        key = str(r["status"]) if r["status"] is not None else (r["error"] or "error").split(":")[0]
        statuses[key] = statuses.get(key, 0) + 1
    candidates: dict[str, int] = {}
    for r in answered:
        candidates[r["candidate"]] = candidates.get(r["candidate"], 0) + 1
    return {"requests": len(results), "answered": len(answered), "failed": len(failed),
            "hangs": sum(r["outcome"] == "hang" for r in results), "failed_by": statuses,
            "by_version": versions, "by_candidate": candidates,
            "latency_p50_s": round(float(np.percentile(lat, 50)), 3) if lat else None,
            "latency_p95_s": round(float(np.percentile(lat, 95)), 3) if lat else None,
            "latency_max_s": round(max(lat), 3) if lat else None,
            "first_error": next((r["error"] for r in failed), None)}


# --- the processes ---------------------------------------------------------------------------------

class Processes:
    """The servers this run started, each logging to a file; stopped in reverse order however the run ends."""

    def __init__(self, logs: Path) -> None:
        self.logs, self.procs = logs, []

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k != "JOULEROUTE_API_KEYS"} | {"TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=(self.logs / f"{name}.log").open("w"),
                                stderr=subprocess.STDOUT, env=env)
        self.procs.append((name, proc))
        return proc

    def stop(self, proc: subprocess.Popen) -> None:
        stop(proc)
        self.procs = [(n, p) for n, p in self.procs if p is not proc]

    def stop_all(self) -> None:
        for _, proc in reversed(self.procs):
            stop(proc)
        self.procs = []

    def ready(self, name: str, proc: subprocess.Popen, url: str, timeout_s: float) -> None:
        try:
            wait_ready(url, proc, timeout_s)
        except RuntimeError as error:
            tail = (self.logs / f"{name}.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise BenchError(f"{name}: {error}; its log ({self.logs / f'{name}.log'}) ends: {' / '.join(tail)}") \
                from None


def gateway_params(ws, upstreams: dict[str, str], models: dict[str, str], router: dict | None, path: Path) -> Path:
    """The workspace's serve.yaml with ``gateway.upstreams`` (and for the bootstrap a fixed ``gateway.router``)."""
    params = yaml.safe_load(ws.serve_params.read_text())
    gateway = params.setdefault("gateway", {})
    gateway["upstreams"] = {cid: {"kind": "openai", "base_url": url, "served_name": models[cid], "timeout_s": 300.0,
                                   # a serve-model server answers one request at a time: under load a connection
                                   # waits its turn, which the default 5 s would turn into a 504
                                   "connect_timeout_s": 300.0}
                            for cid, url in upstreams.items()}
    if router is not None:
        gateway["router"] = router
    path.write_text(f"# {ws.rel}/serve.yaml for benchmarks/bench_loop.py: its pool behind `jouleroute serve-model` "
                    "servers on this run's ports.\n" + yaml.safe_dump(params, sort_keys=False))
    return path


def readyz(base: str) -> dict:
    import httpx

    return httpx.get(f"{base}/readyz", timeout=10).json()


def capture_gauges(base: str) -> dict:
    import httpx

    found = {}
    for line in httpx.get(f"{base}/metrics", timeout=10).text.splitlines():
        for key in ("capture_records", "capture_dropped", "feedback_records"):
            if line.startswith(f"jouleroute_gateway_{key} "):
                found[key] = int(float(line.split()[-1]))
    return found
