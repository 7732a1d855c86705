"""Shared helpers for the benchmark scripts: machine conditions and result files."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def conditions() -> dict:
    """What the numbers depend on: machine, load, versions, commit."""
    import torch
    import transformers

    from jouleroute.torch_env import native_bf16_cpu

    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        sha = "uncommitted"
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git_sha": sha,
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_bf16": native_bf16_cpu(),  # `precision: native` runs bf16 only where this is true (AMX/AVX512-BF16)
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)),  # fewer when pinned (taskset -c 0,1: "on 2 cores")
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
        **({"gpu": torch.cuda.get_device_name(0)} if torch.cuda.is_available() else {}),
        "load_avg_1m_before": round(os.getloadavg()[0], 2),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def cpu_model() -> str:
    """/proc/cpuinfo's model name (``unknown`` elsewhere): two results compare only on the same kind of host."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def write_result(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload["conditions"]["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path
