"""Set-up figures a newcomer can plan by: a fresh clone's `make setup` and first `make run`, timed.

    .venv/bin/python benchmarks/bench_setup.py [--dest /work/fresh_setup] [--skip-run]

Clones this repository (its HEAD) into DEST, whose parent must hold ``shared/`` (the data root then
fills from ``../shared/data``, as it does for a checkout beside it; elsewhere it comes from the original
URLs), then in the clone:

1. times ``make setup`` (the venv, the pip installs, the browser check, the data fetch);
2. measures the venv's size and the clone's (right after ``git clone``, and after the first run);
3. times the first ``make run`` (every stage through ``dvc repro``, then ``jouleroute where``), noting
   when DVC starts each stage in its output, so the same run gives each stage's wall time;
4. sums the size of the wheels pip installs (``pip install --dry-run --report``: what a newcomer's
   machine downloads when none is cached): a wheel on this machine's disk (torch's CPU wheel, pip's local
   indexes) by its file, one from the package index by a HEAD request for that file.

The machine is shared: the load average is sampled every 15 s during both timings and recorded with
``nproc``. Writes ``results/setup.json`` and, from the same run, ``results/end_to_end.json`` (the
stage-by-stage table ``bench_end_to_end.py`` writes, with ``make setup`` counted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import unquote

from _common import RESULTS, cpu_model

ROOT = Path(__file__).resolve().parents[1]
STAGE_LINE = re.compile(r"^Running stage '([^']+)'")
SKIP_LINE = re.compile(r"^Stage '([^']+)' didn't change, skipping")
GIB = 1024**3


class LoadSampler(threading.Thread):
    """The 1-minute load average every ``every_s`` seconds while a timed command runs."""

    def __init__(self, every_s: float = 15.0):
        super().__init__(daemon=True)
        self.every_s, self.samples, self._halt = every_s, [], threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples.append(round(os.getloadavg()[0], 2))
            self._halt.wait(self.every_s)

    def stop(self) -> dict:
        self._halt.set()
        self.join()
        s = self.samples or [round(os.getloadavg()[0], 2)]
        return {"mean": round(sum(s) / len(s), 2), "max": max(s), "samples": len(s), "every_s": self.every_s}


def du_bytes(path: Path, exclude: tuple[str, ...] = ()) -> int:
    """``du -sb`` of a folder (apparent size in bytes), leaving out the named sub-folders."""
    cmd = ["du", "-sb", *(f"--exclude={name}" for name in exclude), str(path)]
    return int(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()[0])


def timed(cmd: list[str], cwd: Path, log: Path, env: dict | None = None) -> dict:
    """Run ``cmd``, its output to ``log`` with each line's offset in seconds; wall time, load and the lines' times."""
    sampler = LoadSampler()
    load_before = round(os.getloadavg()[0], 2)
    sampler.start()
    started = time.perf_counter()
    lines: list[tuple[float, str]] = []
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                bufsize=1)
        for line in proc.stdout:
            at = time.perf_counter() - started
            lines.append((at, line.rstrip("\n")))
            out.write(f"[{at:8.1f}] {line}")
            out.flush()
        rc = proc.wait()
    wall = time.perf_counter() - started
    return {"cmd": " ".join(cmd), "rc": rc, "wall_s": round(wall, 1), "load_avg_1m_before": load_before,
            "load_avg_1m_after": round(os.getloadavg()[0], 2), "load_avg_1m_during": sampler.stop(), "_lines": lines}


def stage_times(lines: list[tuple[float, str]], wall_s: float) -> tuple[dict[str, float], list[str]]:
    """Each stage's wall time, from when DVC says it runs the stage to when it updates the lock file for it (or,
    failing that line, to the next stage's start or the end); the stages DVC skipped are listed apart."""
    starts = [(i, at, m.group(1)) for i, (at, line) in enumerate(lines) if (m := STAGE_LINE.match(line))]
    skipped = [m.group(1) for _, line in lines if (m := SKIP_LINE.match(line))]
    times = {}
    for k, (i, at, name) in enumerate(starts):
        stop = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        end = next((t for t, line in lines[i + 1:stop] if line.startswith("Updating lock file")),
                   lines[stop][0] if stop < len(lines) else wall_s)
        times[name] = round(end - at, 1)
    return times, skipped


def wheel_sizes(python: Path, cwd: Path) -> dict:
    """What pip would install into an empty venv for this project (torch first, as the Makefile does), and the
    wheels' total size: the figure a newcomer's machine downloads when none of them is cached."""
    report = cwd / ".pip-report.json"
    cmd = [str(python), "-m", "pip", "install", "--dry-run", "--ignore-installed", "-qq", "--report", str(report),
           "torch==2.13.0", "-e", ".[dev]"]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-400:]}
    items = json.loads(report.read_text())["install"]
    report.unlink()
    total, local, remote, remote_b, torch_b, largest = 0, 0, 0, 0, 0, []
    for item in items:
        url = item["download_info"]["url"]
        name = item["metadata"]["name"]
        if url.startswith("file://"):
            path = Path(unquote(url.removeprefix("file://")))  # torch-2.13.0%2Bcpu-...: the URL's '+'  
            if path.is_dir():  # the project itself, installed editable
                continue
            size = path.stat().st_size
            local += 1
        else:  # fetched from the package index: its size from a HEAD request for that one file
            size = index_size(url)
            remote += 1
            remote_b += size
        total += size
        torch_b += size if name == "torch" else 0
        largest.append((size, f"{name}=={item['metadata']['version']}"))
    largest.sort(reverse=True)
    return {
        "packages": len(items) - 1,
        "wheels_total_bytes": total,
        "wheels_total_gib": round(total / GIB, 2),
        "torch_wheel_bytes": torch_b,
        "torch_wheel": next((n for _, n in largest if n.startswith("torch==")), None),
        "largest": [{"wheel": n, "mib": round(s / 2**20, 1)} for s, n in largest[:8]],
        "from_local_disk": local,
        "from_network": remote,
        "from_network_bytes": remote_b,
        "from_network_gib": round(remote_b / GIB, 2),
    }


def index_size(url: str) -> int:
    """A wheel's size on the package index (its Content-Length), without downloading it; 0 if not stated."""
    import httpx

    try:
        return int(httpx.head(url, timeout=30, follow_redirects=True).headers.get("content-length", 0))
    except (httpx.HTTPError, ValueError):
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dest", type=Path, default=Path("/work/fresh_setup"))
    parser.add_argument("--skip-run", action="store_true", help="time make setup only")
    parser.add_argument("--finish", action="store_true",
                        help="no new run: the sizes and wheels of the clone at DEST, with the times of the run that "
                             "made it (results/end_to_end.json, written when that run ended)")
    args = parser.parse_args()
    dest: Path = args.dest.resolve()
    if args.finish:
        return finish(dest)
    if not (dest.parent / "shared" / "data").is_dir():
        print(f"note: {dest.parent / 'shared/data'} does not exist: the data root will be fetched from its URLs",
              file=sys.stderr)
    if dest.exists():
        shutil.rmtree(dest)
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    logs = Path("/tmp") / f"bench_setup-{sha}"
    logs.mkdir(exist_ok=True)
    conditions = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "git_sha": sha,
        "nproc": int(subprocess.run(["nproc"], capture_output=True, text=True).stdout),
        "logical_cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
        "python": subprocess.run(["python3.11", "--version"], capture_output=True, text=True).stdout.split()[-1],
        "os": platform.platform(),
        "chromium_already_installed": shutil.which("chromium") is not None,
        "data_from": "../shared/data" if (dest.parent / "shared" / "data").is_dir() else "original URLs",
        "wheels_from": "pip's find-links and file:// indexes on this machine where they hold the wheel (torch's CPU "
                       "wheel among them), else the package index",
        "load_avg_1m_before": round(os.getloadavg()[0], 2),
    }
    started = time.perf_counter()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(dest)], check=True)
    clone_s = round(time.perf_counter() - started, 1)
    sizes = {"clone_bytes": du_bytes(dest)}
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = ":".join(p for p in env["PATH"].split(":") if ".venv" not in p)  # this checkout's venv stays out
    env["PYTHONUNBUFFERED"] = "1"  # each line as it is printed: the stage times read them
    print(f"clone {clone_s} s; make setup ...", flush=True)
    setup = timed(["make", "setup"], dest, logs / "make_setup.log", env)
    setup.pop("_lines")
    print(f"make setup: rc {setup['rc']}, {setup['wall_s']} s", flush=True)
    sizes["venv_bytes"] = du_bytes(dest / ".venv")
    sizes["data_bytes_after_setup"] = du_bytes(dest / "data")
    result: dict = {"conditions": conditions, "clone_s": clone_s, "make_setup": setup}
    if setup["rc"] == 0 and not args.skip_run:
        print("make run ...", flush=True)
        run = timed(["make", "run"], dest, logs / "make_run.log", env)
        lines = run.pop("_lines")
        stages, skipped = stage_times(lines, run["wall_s"])
        run["stages_s"], run["stages_skipped"] = stages, skipped
        result["make_run"] = run
        print(f"make run: rc {run['rc']}, {run['wall_s']} s", flush=True)
        sizes["clone_bytes_after_run"] = du_bytes(dest)
        sizes["clone_bytes_after_run_without_venv"] = du_bytes(dest, exclude=(".venv",))
        if run["rc"] == 0:
            write_end_to_end(setup, run, conditions)
    sizes = {**sizes, **{k.replace("_bytes", "_gib"): round(v / GIB, 2) for k, v in sizes.items()}}
    result["sizes"] = sizes
    result["wheels"] = wheel_sizes(dest / ".venv/bin/python", dest)
    conditions["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
    conditions["logs"] = str(logs)
    out = RESULTS / "setup.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if setup["rc"] == 0 and result.get("make_run", {}).get("rc", 0) == 0 else 1


def finish(dest: Path) -> int:
    """setup.json for a run whose end_to_end.json was written but whose last steps failed (the first run here: a
    wheel's file URL, ``%2B`` for ``+``, stopped ``wheel_sizes``). Times and the run's load come from that record;
    the sizes and wheels are measured now on the same clone; the clone's checkout size on a new clone of the same
    commit; the load during ``make setup`` was not kept."""
    e2e = json.loads((RESULTS / "end_to_end.json").read_text())
    conditions = e2e["conditions"]
    sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=dest, capture_output=True, text=True,
                         check=True).stdout.strip()
    if sha != conditions["git_sha"]:
        sys.exit(f"bench_setup --finish: {dest} is at {sha}, the record at {conditions['git_sha']}")
    stages = {k: v for k, v in e2e["stages_s"].items() if not k.startswith(("setup", "other"))}
    setup_s = e2e["stages_s"]["setup (make setup)"]
    run_s = round(e2e["total_s"] - setup_s, 1)
    fresh = Path(tempfile.mkdtemp(prefix="bench-setup-clone-")) / "clone"
    subprocess.run(["git", "clone", "-q", str(dest), str(fresh)], check=True)
    sizes = {"clone_bytes": du_bytes(fresh), "venv_bytes": du_bytes(dest / ".venv"),
             "data_bytes_after_setup": du_bytes(dest / "data"), "clone_bytes_after_run": du_bytes(dest),
             "clone_bytes_after_run_without_venv": du_bytes(dest, exclude=(".venv",))}
    shutil.rmtree(fresh.parent)
    sizes = {**sizes, **{k.replace("_bytes", "_gib"): round(v / GIB, 2) for k, v in sizes.items()}}
    conditions = {k: v for k, v in conditions.items() if k not in ("load_avg_1m_during_run", "load_avg_1m_after")}
    conditions["wheels_from"] = ("pip's find-links and file:// indexes on this machine where they hold the wheel "
                                 "(torch's CPU wheel among them), else the package index")
    conditions["recovered"] = finish.__doc__.split(".")[0].strip() + "; sizes and wheels measured " + \
        time.strftime("%Y-%m-%dT%H:%M:%S%z")
    result = {
        "conditions": conditions, "clone_s": None,
        "make_setup": {"cmd": "make setup", "rc": 0, "wall_s": setup_s, "load_avg_1m_before": e2e["load_avg_1m_before"],
                       "load_avg_1m_during": None},
        "make_run": {"cmd": "make run", "rc": 0, "wall_s": run_s,
                     "load_avg_1m_after": e2e["conditions"]["load_avg_1m_after"],
                     "load_avg_1m_during": e2e["conditions"]["load_avg_1m_during_run"], "stages_s": stages},
        "sizes": sizes,
        "wheels": wheel_sizes(dest / ".venv/bin/python", dest),
    }
    (RESULTS / "setup.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def write_end_to_end(setup: dict, run: dict, conditions: dict) -> None:
    """results/end_to_end.json from the same cold run: `make setup`, then each stage of the first `make run`."""
    timings = {"setup (make setup)": setup["wall_s"], **run["stages_s"]}
    # what is outside every stage: dvc's own start-up and checks, `jouleroute repro`'s params check, `where`
    timings["other (dvc, params check, where)"] = round(run["wall_s"] - sum(run["stages_s"].values()), 1)
    total = round(setup["wall_s"] + run["wall_s"], 1)
    target_s = 20 * 60
    payload = {
        "stages_s": timings,
        "total_s": total,
        "share": {k: round(v / total, 3) for k, v in timings.items()},
        "dominant_stage": max(run["stages_s"], key=run["stages_s"].get),
        "target_s": target_s,
        "ratio_to_target": round(total / target_s, 3),
        "forced": False,
        "setup_included": True,
        "met": total <= target_s,
        "load_avg_1m_before": setup["load_avg_1m_before"],
        "cpus": conditions["nproc"],
        "source": "benchmarks/bench_setup.py: a fresh clone's make setup and first make run (stage times from "
                  "when dvc repro starts each stage)",
        "conditions": {**conditions, "load_avg_1m_after": run["load_avg_1m_after"],
                       "load_avg_1m_during_run": run["load_avg_1m_during"]},
    }
    (RESULTS / "end_to_end.json").write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
