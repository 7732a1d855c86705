"""End-to-end wall time of the embedded-default pipeline, stage by stage.

Runs `dvc repro --single-item <stage>` for each stage in order (the same commands
`make run` runs through `dvc repro`) and records each stage's wall time and share of
the total, so the dominant stage is named by measurement. Use `--force` to time a
full rerun even when DVC has the results cached.

    python3 benchmarks/bench_end_to_end.py --setup                      # cold `make run` in a fresh clone, install included
    .venv/bin/python benchmarks/bench_end_to_end.py [--force]          # the embedded default (make run)
    .venv/bin/python benchmarks/bench_end_to_end.py --study [--force]  # the replay study (make study)

Writes benchmarks/results/end_to_end.json (or study_end_to_end.json with --study).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script: the checkout's jouleroute, whose dvc.yaml this times
from jouleroute.stages.table import stage_order  # noqa: E402  (the one list of stages: dvc.yaml)

STAGES = tuple(stage_order(ROOT / "dvc.yaml"))
STUDY = "studies/replay/dvc.yaml"
# the study reuses the main pipeline's `models` stage (the router's base model), then runs its own
STUDY_STAGES = ("models", *(f"{STUDY}:{name}" for name in stage_order(ROOT / STUDY)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="rerun every stage even if cached")
    parser.add_argument("--study", action="store_true", help="time the replay study (make study) instead")
    parser.add_argument("--setup", action="store_true",
                        help="time `make setup` first (venv + pip install, as on a fresh clone) and count it in the total")
    args = parser.parse_args()
    stages, target_min = (STUDY_STAGES, 30) if args.study else (STAGES, 20)
    bin_dir = ROOT / ".venv/bin" if args.setup else Path(sys.executable).parent
    dvc = str(bin_dir / "dvc")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    timings: dict[str, float] = {}
    load_before = os.getloadavg()[0]
    if args.setup:  # the target counts a cold `make run`: install included
        started = time.perf_counter()
        done = subprocess.run(["make", "setup"], cwd=ROOT)
        timings["setup (make setup)"] = round(time.perf_counter() - started, 1)
        print(f"setup        {timings['setup (make setup)']:8.1f} s", flush=True)
        if done.returncode != 0:
            return done.returncode
    for stage in stages:
        cmd = [dvc, "repro", "--single-item", stage] + (["--force"] if args.force else [])
        started = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=env)
        timings[stage] = round(time.perf_counter() - started, 1)
        print(f"{stage:12s} {timings[stage]:8.1f} s", flush=True)
        if done.returncode != 0:
            print(f"stage {stage} failed", file=sys.stderr)
            return done.returncode
    total = sum(timings.values())
    result = {
        "stages_s": timings,
        "total_s": round(total, 1),
        "share": {k: round(v / total, 3) for k, v in timings.items()},
        "dominant_stage": max(timings, key=timings.get),
        "target_s": target_min * 60,
        "ratio_to_target": round(total / (target_min * 60), 3),
        "forced": args.force,
        "setup_included": args.setup,
        "met": total <= target_min * 60,
        "load_avg_1m_before": load_before,
        "cpus": os.cpu_count(),
    }
    out = ROOT / "benchmarks/results" / ("study_end_to_end.json" if args.study else "end_to_end.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
