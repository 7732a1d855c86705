"""GPU check: measured energy of a generation batch on CUDA, cross-checked against power samples.

Builds a random-weight Llama (no download), runs batches with jouleroute's transformers
backend on the GPU inside ZeusMeter windows, and prints the measured figures: energy_j,
average power, window length, source, GPU name, power limit, idle power, and the energy
split per request. A thread samples NVML's power reading during the windows; integrating
those samples should roughly agree with the energy counter. Exit status 1 when a sanity
check fails (zero energy, power above the limit, no GPU).

Run through scripts/gpu_check.sh. ``--cpu-dry-run`` exercises the same path on CPU with
the estimate meter (figures then labelled 'estimated').
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from jouleroute.backends import GenRequest
from jouleroute.backends.tiny import build_tiny_llama
from jouleroute.backends.transformers_backend import TransformersBackend
from jouleroute.energy import EnergyConfig, attribute_window, attribution_rule, make_meter


class PowerSampler(threading.Thread):
    """Samples nvmlDeviceGetPowerUsage every ``period_s`` and integrates it (trapezoids)."""

    def __init__(self, gpu_index: int, period_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        import pynvml

        pynvml.nvmlInit()
        self.pynvml, self.handle, self.period_s = pynvml, pynvml.nvmlDeviceGetHandleByIndex(gpu_index), period_s
        self.samples: list[tuple[float, float]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.samples.append((time.perf_counter(), self.pynvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0))
            time.sleep(self.period_s)

    def energy_j(self, start: float, end: float) -> float:
        points = [(t, w) for t, w in self.samples if start <= t <= end]
        return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in zip(points, points[1:]))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Measured GPU energy of a generation batch (Zeus/NVML).")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--cpu-dry-run", action="store_true", help="no GPU: CPU + estimate meter, tiny sizes")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    import torch

    if args.cpu_dry_run:
        device, meter_kind = "cpu", "estimate"
        args.hidden, args.layers, args.heads, args.batch, args.max_new_tokens, args.dtype = 64, 2, 4, 4, 16, "float32"
    else:
        if not torch.cuda.is_available():
            print("FAIL: torch sees no CUDA device", file=sys.stderr)
            return 1
        device, meter_kind = "cuda", "zeus"
    meter = make_meter(EnergyConfig(meter=meter_kind, gpu_indices=[0] if device == "cuda" else None, min_window_s=1.0))
    report: dict = {"device_info": meter.device_info(), "power_limit_w": meter.power_limit_w(), "source": meter.source}
    report["idle_power_w"] = meter.measure_idle_power_w(args.idle_seconds)  # before the model is loaded

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        build_tiny_llama(Path(folder), hidden_size=args.hidden, num_layers=args.layers, num_heads=args.heads)
        backend = TransformersBackend(folder, device=device, dtype=args.dtype)
        report["model"] = {
            "hidden": args.hidden, "layers": args.layers, "dtype": args.dtype,
            "parameters": sum(p.numel() for p in backend.model.parameters()),
            "build_and_load_s": round(time.perf_counter() - started, 2),
        }
        prompts = [f"Question {i}: what is {i} plus {2 * i}? Energy is measured in joules." for i in range(args.batch)]
        requests = [GenRequest(prompt=p, max_new_tokens=args.max_new_tokens) for p in prompts]
        backend.generate(requests)  # warm-up (CUDA kernels, allocator) outside every window

        sampler = PowerSampler(0) if device == "cuda" else None
        if sampler:
            sampler.start()
        windows = []
        for _ in range(args.windows):
            t0 = time.perf_counter()
            with meter.window() as box:
                results = backend.generate(requests)
            t1 = time.perf_counter()
            m = box[0]
            shares = attribute_window(m, [r.input_tokens for r in results], [r.output_tokens for r in results], report["idle_power_w"])
            tokens = sum(r.output_tokens for r in results)
            windows.append({
                "window_s": round(m.time_s, 4), "energy_j": round(m.energy_j, 3), "avg_power_w": round(m.avg_power_w, 2),
                "source": m.source, "per_device_j": m.per_device_j, "output_tokens": tokens,
                "energy_j_per_output_token": round(m.energy_j / max(tokens, 1), 5),
                "energy_net_j": round(m.energy_j - report["idle_power_w"] * m.time_s, 3),
                "first_request_energy_j": round(shares[0][0], 4), "first_request_energy_net_j": round(shares[0][1], 4),
                "sampled_power_energy_j": round(sampler.energy_j(t0, t1), 3) if sampler else None,
            })
        if sampler:
            sampler.stop_event.set()
        backend.close()
    report["windows"] = windows
    report["energy_attribution"] = attribution_rule()
    failures = check(report)
    report["failures"] = failures
    print(json.dumps(report, indent=2))
    out = Path(os.environ.get("OUT", "artifacts")) / "gpu_check.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}; {'OK' if not failures else 'FAILED: ' + '; '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


def check(report: dict) -> list[str]:
    failures = []
    limit = report["power_limit_w"]
    for i, w in enumerate(report["windows"]):
        if w["energy_j"] <= 0:
            failures.append(f"window {i}: energy {w['energy_j']} J is not positive")
        if limit and w["avg_power_w"] > 1.05 * limit:
            failures.append(f"window {i}: average power {w['avg_power_w']} W above the {limit} W limit")
        sampled = w["sampled_power_energy_j"]
        if sampled and not 0.7 <= w["energy_j"] / sampled <= 1.3:
            failures.append(f"window {i}: counter {w['energy_j']} J vs sampled power {sampled} J differ by >30 %")
    return failures


if __name__ == "__main__":
    sys.exit(main())
