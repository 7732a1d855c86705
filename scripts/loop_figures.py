"""docs/loop.md's `loop-run` block (scripts/doc_figures.py): the loop run by hand on the embedded default, from
benchmarks/bench_loop.py's record.

The record (benchmarks/results/loop_run.json, committed) holds the loop workspace's report.jsonl as it stood at
the end of the run (``report``), so the block reads the same on a fresh clone, where the workspace's generated
data is not; the table is jouleroute/loop/report.py's own rendering of those lines. A `--quick` smoke run writes
loop_run-quick.json, which no block reads.
"""

from __future__ import annotations

import json

from figure_sources import ROOT, need


def loop_run() -> str:
    from jouleroute.loop.report import render

    run = json.loads(need(ROOT / "benchmarks/results/loop_run.json",
                          "run `.venv/bin/python benchmarks/bench_loop.py` on a quiet machine").read_text())
    c, t, w, v, cap = run["conditions"], run["traffic"], run["window"], run["versions"], run["capture"]
    table = render(run["report"]).split("\n| iteration |", 1)[1]
    first = ("the main pipeline's deployed policy (adopted by `--init`)" if run["first_served"].startswith("adopted")
             else "a first iteration's policy (no main pipeline champion on that machine: the bootstrap round served "
                  f"{run['bootstrap']['traffic']['requests']} requests with the reference candidate alone, and "
                  "its iteration promoted the first version without a comparison)")
    versions = ", ".join(f"`{name}` {n}" for name, n in sorted(w.get("by_version", {}).items())) or "none"
    walls = ", ".join(f"{step} {s:g} s" for step, s in run["wall_s"].items())
    stages = ", ".join(f"{name} {s:g} s" for name, s in run["iteration"]["stage_wall_s"].items())
    met = "**met**" if w.get("met") else "**not met**"
    seed = f" --seed {run['seed']}" if run.get("seed") else ""
    failed = ", ".join(f"{n} with {status}" for status, n in sorted(t.get("failed_by", {}).items()))
    why = _message(t.get("first_error"))
    failed = f" ({failed}{': ' + why if why else ''})" if failed else ""
    rate = (f"{run['rate_per_s']:g}/s, half the {t['answered_per_s']:g} answers/s the models served the traffic at"
            if run.get("rate_chosen_by") else f"{run['rate_per_s']:g}/s")
    drift = (run["report"][-1].get("gate") or {}).get("drift") or {}
    drift = (f"{drift['share']:.0%} of the newest traffic's queries farther from the served version's training "
             f"queries than its {drift['quantile']:g} quantile of their own nearest-neighbour distances"
             if drift.get("share") is not None else drift.get("skipped", "not measured"))
    lines = [
        f"_{c['when']}, git {c['git_sha']}, {c['usable_cpus']} usable CPUs ({c['cpu_model']}), load average "
        f"(1 min) {c['load_avg_1m_before']} before / {c['load_avg_1m_after']} after; `benchmarks/bench_loop.py "
        f"--requests {run['requests']}{seed}`, "
        f"labels `{run['labels']}`, each model behind "
        "`jouleroute serve-model` on loopback._",
        "",
        f"- **served with capture on**: {t['requests']} completions of {', '.join(run['tasks'])} "
        f"({t['answered']} answered, {t['failed']} failed{failed}, p95 {t['latency_p95_s']} s), {t['feedback_accepted']} "
        f"scored by `POST /v1/feedback`; at the end of the run (the reload window's requests too) the capture folder "
        f"held {cap['records']} records ({cap['torn_lines']} torn lines, {cap['duplicates']} duplicates) and "
        f"{cap['feedback_records']} feedback lines. Served first: {first}.",
        f"- **the iteration**: {run['iteration']['wall_s']:g} s (stages: {stages}; gate, promotion and record "
        f"{run['iteration']['after_stages_s']:g} s). Drift: {drift}.",
        "",
        "| iteration |" + table.rstrip("\n"),
        "",
        f"- **served before / after**: `{v['before']}` / `{v['after']}` (the decided version `{v['decided']}`).",
        f"- **the reload window** (from evaluate's end until the decided version had been served "
        f"{run.get('settle_s', 10):g} s): {w.get('requests', 0)} completions open loop at {rate} "
        f"over {w.get('duration_s', 0):g} s, each with a {run['timeout_s']:g} s timeout: {w.get('answered', 0)} "
        f"answered, **{w.get('failed', 0)} failed, {w.get('hangs', 0)} hung**; answered by version: {versions}; "
        f"versions other than the old and the new: {len(w.get('unexpected_versions', []))}; p95 "
        f"{w.get('latency_p95_s')} s. Target (0 failed, 0 hung, only the old or the new version): {met}.",
        f"- **wall times**: {walls}.",
    ]
    return "\n".join(lines) + "\n"


def _message(error: str | None) -> str:
    """The gateway's error message of a failed request, without its JSON wrapping or its advice."""
    if not error:
        return ""
    import re

    found = re.search(r'"message":\s*"([^;"]*)', error)  # the record keeps the body's first 200 characters
    return (found.group(1) if found else error).split(";")[0].replace("\\'", "'")
