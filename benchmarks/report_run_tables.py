"""The whole-run figures of benchmarks/report.py: `make run` and `make study` stage by stage, and a fresh clone's
set-up (also the top-level README's setup-figures block).
"""

from __future__ import annotations

import json

from _common import RESULTS
from report_format import gib, optional


def end_to_end(file_name: str, title: str) -> None:
    data = json.loads((RESULTS / file_name).read_text())
    if "stages_s" not in data or "total_s" not in data:
        return  # an older hand-assembled record
    print(f"### {title} (`results/{file_name}`)\n")
    print("| stage | s |\n|---|---|")
    for stage, seconds in data["stages_s"].items():
        print(f"| {stage} | {seconds} |")
    c = data.get("conditions") or {}
    during = c.get("load_avg_1m_during_run")
    print(f"| **total** | **{data['total_s']}** ({data['ratio_to_target']:.2f} of the {data['target_s'] // 60}-min "
          f"target; load {data['load_avg_1m_before']} before"
          + (f", {during['mean']} during the run (max {during['max']})" if during else "")
          + f", {data['cpus']} CPUs" + (f", git {c['git_sha']}" if c.get("git_sha") else "") + ") |\n")
    if data.get("source"):
        print(f"From {data['source']}.\n")


def setup_figures(heading: str | None = "###") -> None:
    """A fresh clone's set-up (bench_setup.py): what a newcomer can plan by. ``heading=None``: no heading (the
    top-level README's block, under its own)."""
    data = optional("setup.json")
    if data is None:
        return
    c, s, st, run, w = data["conditions"], data["sizes"], data["make_setup"], data.get("make_run"), data["wheels"]
    where = f"`benchmarks/results/setup.json`: benchmarks/bench_setup.py on a fresh clone at git {c['git_sha']}"
    print(f"{heading} Set-up figures ({where})\n" if heading else f"Measured ({where}):\n")
    print("| what | figure |\n|---|---|")
    print(f"| Python | {c['python']} (3.11 required: `pyproject.toml` says `>=3.11,<3.12`, the Makefile calls "
          "`python3.11`) |")
    print(f"| `make setup` | {st['wall_s'] / 60:.1f} min ({st['wall_s']:g} s) |")
    if run:
        print(f"| first `make run` | {run['wall_s'] / 60:.1f} min ({run['wall_s']:g} s; "
              f"{'ok' if run['rc'] == 0 else 'failed, exit ' + str(run['rc'])}) |")
    print(f"| disk: the venv (`.venv`) | {gib(s['venv_bytes'])} |")
    print(f"| disk: the clone (git and work tree) | {gib(s['clone_bytes'])} |")
    if "clone_bytes_after_run_without_venv" in s:
        print(f"| disk: the clone after the first run, without the venv (data, models, artifacts, DVC cache) "
              f"| {gib(s['clone_bytes_after_run_without_venv'])} |")
    if "wheels_total_bytes" in w:
        print(f"| download: the wheels pip installs | {gib(w['wheels_total_bytes'])} in {w['packages']} packages, "
              f"of which torch's CPU wheel {gib(w['torch_wheel_bytes'])} |")
    print(f"| machine | {c['nproc']} cores ({c['cpu_model']}), {c['memory_gib']} GiB memory |")
    during = ([f"`make setup` {st['load_avg_1m_during']['mean']} (max {st['load_avg_1m_during']['max']})"]
              if st.get("load_avg_1m_during") else [f"`make setup` {st['load_avg_1m_before']} at its start"])
    if run:
        during.append(f"`make run` {run['load_avg_1m_during']['mean']} (max {run['load_avg_1m_during']['max']})")
    print(f"| load average (1 min) during | {', '.join(during)}: the machine was shared, so on an idle one "
          "both take less |")
    print()
    local_b = w.get("wheels_total_bytes", 0) - w.get("from_network_bytes", 0)
    print(f"Measured {c['when'][:10]}. Of the {w.get('packages')} wheels, {w.get('from_local_disk')} ({gib(local_b)}, "
          f"torch's among them) lay on this machine's disk and {w.get('from_network')} "
          f"({gib(w.get('from_network_bytes', 0))})"
          " came from the package index during the timed `make setup` (pip's cache was empty); on a machine "
          "without the local wheels, add the time to fetch the rest. "
          f"The data root filled from {c['data_from']} (from the original URLs elsewhere: docs/data.md); "
          + ("Chromium was already installed (where it is not, `make setup` installs it as root with apt, which "
             "these figures do not include). " if c["chromium_already_installed"] else "")
          + ("" if heading is None else  # the README says what to do about torch in its own words, above the block
             f"torch goes in first as the CPU build ({w.get('torch_wheel') or 'torch==2.13.0'}, a local wheel here); "
            "on a machine where pip's default index would bring the CUDA build (gigabytes more, with its CUDA "
            "libraries), make the venv and put the CPU wheel of torch 2.13.0 in it first (`python3.11 -m venv "
            ".venv`, then `.venv/bin/pip install` the wheel from PyTorch's CPU index), then `make setup`: its "
            "`pip install torch==2.13.0` is then already satisfied.") + "\n")
