"""What the tables of benchmarks/report.py share: a result file that may be missing, the machine-conditions
line under each table, counts and sizes as text."""

from __future__ import annotations

import json

from _common import RESULTS


def optional(file_name: str) -> dict | None:
    """A result file of RESULTS, or None when that benchmark has not been run on this machine."""
    path = RESULTS / file_name
    return json.loads(path.read_text()) if path.is_file() else None


def conditions_line(c: dict) -> str:
    return (
        f"_{c['when']}, git {c['git_sha']}, {c['logical_cpus']} logical CPUs"
        + (f" ({c['cpu_model']}, bf16 matrix units {'yes' if c.get('cpu_bf16') else 'no'})"
           if c.get("cpu_model") else "")
        + f", torch threads {c['torch_threads']}, "
        f"CUDA {c['cuda']}, load average (1 min) {c['load_avg_1m_before']} before / {c['load_avg_1m_after']} after, "
        f"torch {c['torch']}, transformers {c['transformers']}._"
    )


def gpu_conditions(c: dict) -> str:
    return (f"_{c['when']}, git {c['git_sha']}, {c['gpu']}, CUDA {c['cuda']}, torch {c['torch']}, "
            f"Python {c['python']}._")


def counts(d: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in d.items()) or "none"


def gib(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"
