"""GPU check of a served pool's energy path: `jouleroute meter` on a real NVIDIA GPU, read as the tournament and
the gateway read it.

It starts `jouleroute meter` as its own process (Zeus over NVML, no stub), with no params file, as on a GPU node
(docs/cluster.md). It generates on the GPU with jouleroute's transformers backend (a random-weight Llama built on
the spot: no download) in windows of mixed lengths, and measures each window three ways:

* ``exporter``: the exporter's counter rise, scraped over HTTP by ``ExporterMeter`` (the tournament's and the
  gateway's reader of a served candidate);
* ``in_process``: Zeus's NVML counter read in this process (``ZeusMeter``), the same counter without HTTP;
* ``sampled``: NVML's power reading sampled every 50 ms and integrated (an independent check of the counter).

Then it splits each exporter window over its requests by the profile's token-share rule, nets out the idle power
the exporter measured before the model was loaded, and reports joules per output token per window length.
Checks (exit 1 when one fails): source ``measured-nvml``, positive energy, exporter within 3 % of the in-process
counter, sampled power within 30 % of the counter, power under the limit. Results: ``$OUT/meter_nvml.json``
(else ``artifacts/meter_nvml.json``); the committed copy is benchmarks/results/meter_nvml-<gpu>.json.

Run through scripts/gpu_check.sh --meter (it installs or finds zeus, then runs this file). ``--cpu-dry-run`` runs
the same path with no GPU: tiny sizes on the CPU, the exporter's counter stubbed at the NVML boundary
(tests/served/stub_counter.RisingCounter) and the in-process meter the CPU estimate; no checks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jouleroute.backends import GenRequest
from jouleroute.backends.tiny import build_tiny_llama
from jouleroute.backends.transformers_backend import TransformersBackend
from jouleroute.energy import EnergyConfig, attribute_window, attribution_rule, make_meter
from jouleroute.energy.exporter import ExporterMeter, read_exporter
from jouleroute.energy.zeus_meter import ZeusMeter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_check import PowerSampler  # noqa: E402  (the same power sampler as the batch check)

METRIC = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512],
                        help="max_new_tokens of the windows (each length is one window per repeat)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--scrapes", type=int, default=200, help="timed scrapes of the exporter (its latency)")
    parser.add_argument("--cpu-dry-run", action="store_true", help="no GPU: stubbed counter, tiny sizes, no checks")
    return parser.parse_args()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_meter(port: int, stub: bool) -> subprocess.Popen:
    """`jouleroute meter` as a GPU node runs it: its own process, no params file (a folder without one)."""
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")])}
    counter = ["--counter", "tests.served.stub_counter:RisingCounter", "--counter-arg", "gpus=1"] if stub else []
    proc = subprocess.Popen([sys.executable, "-m", "jouleroute", "meter", "--port", str(port), *counter],
                            cwd=tempfile.mkdtemp(), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"jouleroute meter exited with {proc.returncode}:\n{proc.stdout.read()}")
        try:
            read_exporter(f"http://127.0.0.1:{port}/metrics", METRIC, [0])
            return proc
        except Exception:  # noqa: BLE001  (not up yet)
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("jouleroute meter did not answer within 60 s")


def scrape_latency_ms(url: str, n: int) -> dict[str, float]:
    import httpx

    times = []
    with httpx.Client() as client:
        for _ in range(n):
            t0 = time.perf_counter()
            read_exporter(url, METRIC, [0], client=client)
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"scrapes": n, "median_ms": round(times[n // 2], 3), "p95_ms": round(times[int(n * 0.95)], 3)}


def main() -> int:
    args = parse_args()
    import torch

    if args.cpu_dry_run:
        args.hidden, args.layers, args.heads, args.batch, args.lengths, args.repeats = 64, 2, 4, 4, [8, 16], 1
        args.idle_seconds, args.scrapes = 0.5, 20
    elif not torch.cuda.is_available():
        print("FAIL: torch sees no CUDA device", file=sys.stderr)
        return 1
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    meter_proc = start_meter(port, stub=args.cpu_dry_run)
    try:
        exporter = ExporterMeter(url, [0])
        zeus = make_meter(EnergyConfig(meter="estimate")) if args.cpu_dry_run else ZeusMeter([0], min_window_s=1.0)
        report: dict = {
            "conditions": {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "python": platform.python_version(),
                           "torch": torch.__version__, "cuda": torch.version.cuda,
                           "gpu": "cpu-dry-run" if args.cpu_dry_run else torch.cuda.get_device_name(0), "git_sha": os.environ.get("GIT_SHA", "unknown")},
            "exporter": {"url": url, "source": exporter.source, "device_info": zeus.device_info(),
                         "scrape_latency": scrape_latency_ms(url, args.scrapes)},
            "power_limit_w": zeus.power_limit_w(),
        }
        idle = exporter.measure_idle_power_w(args.idle_seconds)  # before the model is loaded
        report["idle_power_w"] = round(idle, 2)
        report["idle_convention"] = ("idle power: the exporter's counter rise over an idle window before the model "
                                     "is loaded, divided by its length; energy_net_j = energy_j - idle_power_w * "
                                     "window_s * share")
        report["windows"] = run_windows(args, exporter, zeus, idle)
    finally:
        meter_proc.terminate()
        meter_proc.wait(timeout=10)
    report["energy_attribution"] = attribution_rule()
    report["summary"] = summarize(report["windows"])
    report["failures"] = [] if args.cpu_dry_run else check(report)
    print(json.dumps(report, indent=2))
    out = Path(os.environ.get("OUT", "artifacts")) / "meter_nvml.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}; {'OK' if not report['failures'] else 'FAILED: ' + '; '.join(report['failures'])}",
          file=sys.stderr)
    return 1 if report["failures"] else 0


def run_windows(args, exporter: ExporterMeter, zeus: ZeusMeter, idle_w: float) -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        build_tiny_llama(Path(folder), hidden_size=args.hidden, num_layers=args.layers, num_heads=args.heads)
        device = "cpu" if args.cpu_dry_run else "cuda"
        backend = TransformersBackend(folder, device=device, dtype="float32" if args.cpu_dry_run else "bfloat16")
        prompts = [f"Question {i}: what is {i} plus {3 * i}? " + "Energy is measured in joules. " * (1 + i % 4)
                   for i in range(args.batch)]
        backend.generate([GenRequest(prompt=p, max_new_tokens=16) for p in prompts])  # warm-up, unmetered
        sampler = None if args.cpu_dry_run else PowerSampler(0)
        if sampler:
            sampler.start()
        windows = []
        for repeat in range(args.repeats):
            for length in args.lengths:
                requests = [GenRequest(prompt=p, max_new_tokens=length) for p in prompts]
                t0 = time.perf_counter()
                outer, inner = exporter.begin(), zeus.begin()
                results = backend.generate(requests)
                torch_sync(device)
                in_process, measured = zeus.end(inner), exporter.end(outer)
                t1 = time.perf_counter()
                shares = attribute_window(measured, [r.input_tokens for r in results],
                                          [r.output_tokens for r in results], idle_w)
                tokens = sum(r.output_tokens for r in results)
                net = sum(s[1] for s in shares)
                windows.append({
                    "repeat": repeat, "max_new_tokens": length, "requests": len(results), "output_tokens": tokens,
                    "window_s": round(measured.time_s, 3), "source": measured.source,
                    "exporter_j": round(measured.energy_j, 2), "in_process_j": round(in_process.energy_j, 2),
                    "sampled_j": round(sampler.energy_j(t0, t1), 2) if sampler else None, "avg_power_w": round(measured.avg_power_w, 1),
                    "attributed_sum_j": round(sum(s[0] for s in shares), 2), "net_j": round(net, 2),
                    "j_per_output_token": round(measured.energy_j / max(tokens, 1), 5),
                    "net_j_per_output_token": round(net / max(tokens, 1), 5),
                    "request_j_min": round(min(s[0] for s in shares), 4),
                    "request_j_max": round(max(s[0] for s in shares), 4),
                })
                print(f"window {repeat}/{length}: {windows[-1]}", file=sys.stderr, flush=True)
        if sampler:
            sampler.stop_event.set()
        backend.close()
    return windows


def torch_sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def summarize(windows: list[dict]) -> dict:
    by_length: dict[int, list[dict]] = {}
    for w in windows:
        by_length.setdefault(w["max_new_tokens"], []).append(w)
    ratios = [w["exporter_j"] / w["in_process_j"] for w in windows if w["in_process_j"] > 0]
    return {
        "exporter_over_in_process": [round(min(ratios), 4), round(max(ratios), 4)] if ratios else None,
        "net_j_per_output_token_by_length": {
            str(k): round(sum(w["net_j"] for w in ws) / max(sum(w["output_tokens"] for w in ws), 1), 5)
            for k, ws in sorted(by_length.items())},
    }


def check(report: dict) -> list[str]:
    failures = []
    if report["exporter"]["source"] != "measured-nvml":
        failures.append(f"the exporter says source {report['exporter']['source']!r}, not measured-nvml")
    limit = report["power_limit_w"]
    for i, w in enumerate(report["windows"]):
        if w["exporter_j"] <= 0 or w["source"] != "measured-nvml":
            failures.append(f"window {i}: {w['exporter_j']} J labelled {w['source']}")
        if w["in_process_j"] > 0 and abs(w["exporter_j"] / w["in_process_j"] - 1) > 0.03:
            failures.append(f"window {i}: exporter {w['exporter_j']} J vs in-process {w['in_process_j']} J (>3 %)")
        if w["sampled_j"] and not 0.7 <= w["exporter_j"] / w["sampled_j"] <= 1.3:
            failures.append(f"window {i}: exporter {w['exporter_j']} J vs sampled power {w['sampled_j']} J (>30 %)")
        if limit and w["avg_power_w"] > 1.05 * limit:
            failures.append(f"window {i}: {w['avg_power_w']} W above the {limit} W limit")
        if abs(w["attributed_sum_j"] - w["exporter_j"]) > 0.01 * max(w["exporter_j"], 1e-9) + 0.01:
            failures.append(f"window {i}: attributed {w['attributed_sum_j']} J != window {w['exporter_j']} J")
    return failures


if __name__ == "__main__":
    sys.exit(main())
