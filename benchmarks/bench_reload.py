"""Hot reload under load (issue 49): while the served policy is swapped under a steady stream of requests, does any
request fail or hang, and does every answer name the old or the new version?

This measures the gateway's reload, not a model's capacity: the upstreams answer at once. bench_loop.py measures
the same window behind real CPU models (`serve-model`, ~0.6 answers/s), which 20 requests/s overload.

- **Upstreams**: bench_faults.py's scripted OpenAI-compatible servers, ``small`` and ``large``, each a process on
  loopback answering a completion of 4 tokens at once.
- **Gateway**: `jouleroute --params loops/reload/serve.yaml serve`, a real process, in a throwaway repository: a
  loop workspace made by the loop's own ``init_loop`` (its serve.yaml: ``serving/champion`` served, capture on),
  with ``gateway.upstreams`` naming the two servers and ``gateway.reload_poll_s`` = ``--poll``.
- **Two versions**, the cheapest honest policies: the evaluate stage's champion folder of kind ``single`` (always
  ``small``, then always ``large``; routing/champion.py ``save_champion``), each promoted by the loop's own
  ``promote_step`` (a version folder, then the atomic symlink swap of loop/serving.py). Version 1 is promoted before
  the gateway starts.
- **Load**: completions open loop at ``--rate``/s for ``--seconds`` s, each with a ``--timeout`` (no answer by then:
  a hang). The events are spread evenly over the run: ``--swaps`` swaps (the first promotes version 2, each later
  one is the loop's ``rollback``, back and forth) and one SIGHUP to the gateway (a reload of the same policy),
  second in line when there is a swap before it.

Counted: requests sent, answered (200), failed (any other status or a connection error), hung; answers by
``X-Jouleroute-Policy-Version`` and any version that is neither; an answer whose candidate is not its version's
(``X-Jouleroute-Candidate``); for each swap the time from the swap to the first answer carrying the new version, and
requests sent after that answer which still carry the old one; p50/p95 latency of requests sent before the first
event, during one (within ``--window`` s after it), between and after; the capture read back after the gateway
stops (records, torn lines, duplicates, answered requests missing from it, records whose version is not the one
the response named). Target: 0 failed, 0 hung, 0 unexpected versions.

Writes benchmarks/results/reload.json with the machine (cores, load average); benchmarks/report.py renders it.

    .venv/bin/python benchmarks/bench_reload.py [--rate 20] [--seconds 30] [--swaps 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_faults import CANDIDATES, run_upstream, start  # noqa: E402
from bench_gateway import free_port, stop, wait_ready  # noqa: E402
from bench_loop import OpenLoad, readyz  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LOOP = "loops/reload"


# --- the workspace ---------------------------------------------------------------------------------

def main_params() -> dict:
    """The repository's params.yaml with a pool of the two scripted candidates (no model is ever loaded: every
    answer comes from an upstream server)."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["models"] = {"scripted": {"source": "local", "path": "never-loaded", "chat_template": True}}
    params["pool"] = [{"candidate_id": c, "model": "scripted", "prompt_style": "chat", "answer_style": "direct",
                       "max_new_tokens": 4, "batch_size": 4} for c in CANDIDATES]
    params["energy"] = {"meter": "estimate", "idle_seconds": 0.1}
    return params


def single_champion(folder: Path, model: str) -> Path:
    """The evaluate stage's champion folder deploying ``model`` alone (champion.json as evaluate writes it)."""
    from jouleroute.routing.champion import save_champion

    record = {"family": "knn", "checkpoint": None, "name": f"always {model}", "lam": 0.1, "lam_chosen_by": "accuracy",
              "lambda_range": [0.0, 2.0], "model_dir": None, "knn_evidence": None, "val_utility": None,
              "evaluate_run_id": None, "val_sweep": None, "policy": "single", "single": model,
              "deployed": {"kind": "single", "name": f"always {model}", "model": model}, "query_energy": [],
              "embedding": {"model": "hashing"}}
    return save_champion(folder, record, {}, None)


def profile(path: Path) -> None:
    """A labelled profile of a few rows per candidate: the served version's expected joules per token."""
    import pandas as pd

    rows = [{"query_id": f"q{i}", "candidate_id": c, "task": "user", "split": "train", "correct": 1,
             "energy_j": (1.0 if c == CANDIDATES[0] else 3.0), "energy_source": "estimated", "input_tokens": 12,
             "output_tokens": 4, "label_source": "vote"} for i in range(4) for c in CANDIDATES]
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)


class Workspace:
    """The throwaway repository with its loop workspace, and the loop's promotion and rollback."""

    def __init__(self, root: Path, poll_s: float) -> None:
        from jouleroute.config import load_params
        from jouleroute.loop.init import init_loop
        from jouleroute.loop.workspace import Workspace as LoopWorkspace

        root.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / "dvc.yaml", root / "dvc.yaml")
        (root / "params.yaml").write_text(yaml.safe_dump(main_params(), sort_keys=False))
        self.root, self.ws = root, LoopWorkspace(root, root / LOOP)
        init_loop(self.ws, capture="capture", labels="vote", poll_s=poll_s)
        self.params = load_params(self.ws.params_file)
        profile(self.params.paths.resolve("labelled_profile", root))
        self.champion = self.params.paths.resolve("evaluate_dir", root) / "champion"
        self.capture = root / "capture"

    def promote(self, model: str, n: int) -> str:
        """What an iteration that promotes does after its gate: evaluate's champion (always ``model``) becomes a
        version folder and the served link is swapped to it (loop/iteration.py ``promote_step``)."""
        from jouleroute.loop.gate import PROMOTE
        from jouleroute.loop.iteration import promote_step

        single_champion(self.champion, model)
        done = promote_step(self.ws, self.params, {"decision": PROMOTE, "reason": "benchmarks/bench_reload.py"},
                            {"data": f"bench-reload-{n}"})
        return done["served"]

    def rollback(self) -> str:
        from jouleroute.loop import serving

        return serving.policy_version(serving.rollback(self.ws.serving))

    def serve_params(self, upstreams: dict[str, str], rate: float) -> Path:
        """The workspace's serve.yaml plus ``gateway.upstreams`` (this run's ports) and a rate limit above ``rate``."""
        params = yaml.safe_load(self.ws.serve_params.read_text())
        gateway = params.setdefault("gateway", {})
        gateway["upstreams"] = {c: {"kind": "openai", "base_url": url, "served_name": c, "timeout_s": 30.0}
                                for c, url in upstreams.items()}
        gateway["limits"] = {"rate_per_minute": max(3000.0, 120 * rate), "burst": 1024}
        path = self.ws.folder / "bench.yaml"
        path.write_text(yaml.safe_dump(params, sort_keys=False))
        return path


# --- the run -------------------------------------------------------------------------------------

def schedule(seconds: float, swaps: int) -> list[tuple[float, str]]:
    """``(seconds into the run, event)``: the swaps and one SIGHUP, evenly spread (module doc)."""
    events = ["swap"] * swaps
    events.insert(min(1, swaps), "sighup")
    return [(seconds * (k + 1) / (len(events) + 1), e) for k, e in enumerate(events)]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(args, work: Path) -> dict:
    from tqdm import tqdm

    from jouleroute.gateway.capture import read_capture

    me = str(Path(__file__).resolve())
    space = Workspace(work / "repo", args.poll)
    logs = work / "logs"
    logs.mkdir()
    procs: list[subprocess.Popen] = []
    try:
        upstreams = {}
        for name in CANDIDATES:
            port = free_port()
            upstreams[name] = f"http://127.0.0.1:{port}/v1"
            procs.append(start(["--role", "upstream", "--name", name, "--port", str(port)], logs / f"{name}.log", me))
        for name, proc in zip(CANDIDATES, procs):
            wait_ready(upstreams[name] + "/models", proc)

        versions = {"v1": space.promote(CANDIDATES[0], 1)}  # served before the gateway starts
        port = free_port()
        env = {k: v for k, v in os.environ.items() if k != "JOULEROUTE_API_KEYS"} | {"TOKENIZERS_PARALLELISM": "false"}
        gateway = subprocess.Popen([str(BIN / "jouleroute"), "--params", str(space.serve_params(upstreams, args.rate)
                                                                               .relative_to(space.root)),
                                    "serve", "--port", str(port)], cwd=space.root, env=env,
                                   stdout=(logs / "gateway.log").open("w"), stderr=subprocess.STDOUT)
        procs.append(gateway)
        base = f"http://127.0.0.1:{port}"
        wait_ready(base + "/readyz", gateway)
        first = readyz(base)["version"]
        if first != versions["v1"]:
            raise RuntimeError(f"the gateway serves {first}, not the promoted {versions['v1']} (log: {logs})")
        cpu_before = cpu_s(gateway.pid)

        prompts = ({"task": "user", "question": f"question {i} about topic {i % 7}"} for i in itertools.count())
        bar = tqdm(total=int(args.rate * args.seconds), desc=f"reload under {args.rate:g} requests/s", unit="req")
        load = OpenLoad(base, prompts, args.rate, args.timeout, 4, bar).start()
        events, served = [], versions["v1"]
        for at, what in schedule(args.seconds, args.swaps):
            time.sleep(max(0.0, load.started + at - time.perf_counter()))
            t = time.perf_counter()
            if what == "sighup":
                gateway.send_signal(signal.SIGHUP)
                events.append({"event": "sighup", "at_s": t - load.started, "from": served, "to": served})
                continue
            n = sum(e["event"] != "sighup" for e in events) + 1
            new = space.promote(CANDIDATES[1], 2) if n == 1 else space.rollback()
            t = time.perf_counter()  # the link is swapped when promote/rollback returns
            versions.setdefault("v2", new)
            events.append({"event": "promote" if n == 1 else "rollback", "at_s": t - load.started, "from": served,
                           "to": new})
            served = new
        time.sleep(max(0.0, load.started + args.seconds - time.perf_counter()))
        results = load.stop()
        bar.close()
        last = readyz(base)["version"]
        gateway_cpu_s = cpu_s(gateway.pid) - cpu_before
    finally:
        for proc in reversed(procs):
            stop(proc)  # SIGTERM: the gateway writes what its capture still queues, then exits
    reloads = [line.strip() for line in (logs / "gateway.log").read_text(errors="replace").splitlines()
               if "reload (" in line]
    captured = read_capture(space.capture)
    return analyse(args, results, load.started, events, versions, first, last, captured) | {
        "gateway_cpu_s": round(gateway_cpu_s, 2), "gateway_reload_log": reloads}


def analyse(args, results: list[dict], t0: float, events: list[dict], versions: dict, first: str, last: str,
            captured) -> dict:
    import numpy as np

    for r in results:
        r["sent"] = r["sent_s"] - t0
        r["done"] = r["sent"] + r["latency_s"]
    answered = [r for r in results if r["outcome"] == "answered"]
    known = set(versions.values())
    candidate_of = {versions["v1"]: CANDIDATES[0], versions.get("v2"): CANDIDATES[1]}
    by_version: dict[str, int] = {}
    for r in answered:
        by_version[r["version"]] = by_version.get(r["version"], 0) + 1

    for e in events:  # the reload each event asked for, seen from the client
        if e["event"] == "sighup":
            continue
        new = sorted((r for r in answered if r["version"] == e["to"] and r["done"] >= e["at_s"]),
                     key=lambda r: r["done"])
        seen = new[0]["done"] if new else None
        e["first_new_answer_after_s"] = None if seen is None else round(seen - e["at_s"], 3)
        nxt = min((x["at_s"] for x in events if x["at_s"] > e["at_s"] and x["event"] != "sighup"), default=1e9)
        e["old_after_first_new"] = 0 if seen is None else sum(
            r["version"] == e["from"] for r in answered if seen < r["sent"] < nxt)

    def phase(r: dict) -> str:
        starts = [e["at_s"] for e in events]
        if any(s <= r["sent"] < s + args.window for s in starts):
            return "during"
        if not starts or r["sent"] < starts[0]:
            return "before"
        return "after" if r["sent"] >= starts[-1] + args.window else "between"

    def pct(values: list[float], q: float) -> float | None:
        return round(float(np.percentile(values, q)), 4) if values else None

    phases = {}
    for name in ("before", "during", "between", "after"):
        mine = [r for r in results if phase(r) == name]
        lat = [r["latency_s"] for r in mine if r["outcome"] == "answered"]
        phases[name] = {"requests": len(mine), "answered": len(lat), "p50_s": pct(lat, 50), "p95_s": pct(lat, 95),
                        "max_s": round(max(lat), 4) if lat else None}

    failed = [r for r in results if r["outcome"] == "failed"]
    failed_by: dict[str, int] = {}
    for r in failed:
        key = str(r["status"]) if r["status"] is not None else (r["error"] or "error").split(":")[0]
        failed_by[key] = failed_by.get(key, 0) + 1
    records = {c["request_id"]: c for c in captured.records}
    header = {r["request_id"]: r["version"] for r in answered}
    capture = {"records": len(captured.records), "torn_lines": captured.torn, "duplicates": captured.duplicates,
               "segments": captured.segments,
               "answered_not_captured": sum(rid not in records for rid in header),
               "captured_not_answered": sum(rid not in header for rid in records),
               "version_differs_from_header": sum(records[rid]["served"]["policy_version"] != v
                                                  for rid, v in header.items() if rid in records)}
    duration = max((r["sent"] for r in results), default=0.0)
    out = {
        "rate_per_s": args.rate, "seconds": args.seconds, "swaps": args.swaps, "timeout_s": args.timeout,
        "reload_poll_s": args.poll, "window_s": args.window,
        "sent": len(results), "offered_rate_per_s": round(len(results) / max(duration, 1e-9), 2),
        "answered": len(answered), "failed": len(failed), "hung": sum(r["outcome"] == "hang" for r in results),
        "failed_by": failed_by, "first_error": next((r["error"] for r in failed), None),
        "versions": versions, "served_at_start": first, "served_at_end": last,
        "by_version": by_version, "unexpected_versions": sorted(v for v in by_version if v not in known),
        "candidate_not_its_version": sum(candidate_of.get(r["version"]) != r["candidate"] for r in answered),
        "events": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in e.items()} for e in events],
        "latency": phases, "capture": capture,
    }
    out["met"] = (out["failed"] == 0 and out["hung"] == 0 and not out["unexpected_versions"]
                  and out["sent"] == out["answered"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second, open loop (default 20)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the load runs (default 30)")
    parser.add_argument("--swaps", type=int, default=2,
                        help="policy swaps during the run: the first promotes version 2, each later one rolls back "
                             "(default 2: there and back)")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="seconds a request may take before it counts as hung (default 10)")
    parser.add_argument("--poll", type=float, default=0.5, help="the gateway's reload_poll_s (default 0.5)")
    parser.add_argument("--window", type=float, default=2.0,
                        help="seconds after an event whose requests count as 'during' it (default 2)")
    parser.add_argument("--role", choices=["upstream"], help=argparse.SUPPRESS)
    parser.add_argument("--name", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "upstream":
        run_upstream(args.name, args.port, 4, 0.0)  # answers at once
        return 0
    if args.swaps < 0 or args.rate <= 0 or args.seconds <= 0:
        parser.error("--rate and --seconds must be > 0, --swaps >= 0")

    from _common import conditions, write_result

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    machine = conditions()
    with tempfile.TemporaryDirectory(prefix="bench-reload-") as tmp:
        result = run(args, Path(tmp))
    result["conditions"] = machine
    path = write_result("reload", result)
    print(json.dumps({k: result[k] for k in ("sent", "answered", "failed", "hung", "by_version",
                                             "unexpected_versions", "events", "latency", "capture", "met")},
                     indent=1))
    print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
