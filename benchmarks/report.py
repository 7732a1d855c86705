"""Render results/*.json as the markdown tables quoted in benchmarks/README.md.

    .venv/bin/python benchmarks/report.py
"""

from __future__ import annotations

import json
import sys

from _common import RESULTS


def conditions_line(c: dict) -> str:
    return (
        f"_{c['when']}, git {c['git_sha']}, {c['logical_cpus']} logical CPUs, torch threads {c['torch_threads']}, "
        f"CUDA {c['cuda']}, load average (1 min) {c['load_avg_1m_before']} before / {c['load_avg_1m_after']} after, "
        f"torch {c['torch']}, transformers {c['transformers']}._"
    )


def batching(file_name: str = "batching.json") -> None:
    data = json.loads((RESULTS / file_name).read_text())
    print(f"### Batching (`results/{file_name}`, {data['batch_size']} queries, max_new_tokens {data['max_new_tokens']})\n")
    print(conditions_line(data["conditions"]) + "\n")
    print("| model | prompting | load s | batch 1 tok/s | batch 8 tok/s | speed-up | est. J/token b1 | est. J/token b8 | same text | prompt/generated token cost |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, m in data["models"].items():
        print(
            f"| {name} | {m['prompting']} | {m['load_s']} | {m['batch_1']['tokens_per_s']} | {m['batch_8']['tokens_per_s']} | "
            f"{m['speedup']}x | {m['batch_1']['energy_j_per_output_token']} | {m['batch_8']['energy_j_per_output_token']} | "
            f"{m['same_text_batched_vs_single']} | {m['prefill']['prefill_to_decode_cost_per_token']} |"
        )
    print()


def meter_overhead() -> None:
    data = json.loads((RESULTS / "meter_overhead.json").read_text())
    print("### Meter overhead (`results/meter_overhead.json`)\n")
    print(conditions_line(data["conditions"]) + "\n")
    print("| meter | source | window s | median overhead µs | p90 µs | share of window |")
    print("|---|---|---|---|---|---|")
    for name, m in data["meters"].items():
        for row in m["rows"]:
            share = row["overhead_share_of_window"]
            print(
                f"| {name} | {m['source']} | {row['window_s']} | {row['overhead_us_median']} | {row['overhead_us_p90']} | "
                f"{'-' if share is None else f'{share:.2%}'} |"
            )
    print()


def router_scoring() -> None:
    data = json.loads((RESULTS / "router_scoring.json").read_text())
    print(f"### LM router: one-pass scoring vs generate (`results/router_scoring.json`, {data['queries']} queries)\n")
    print(conditions_line(data["conditions"]) + "\n")
    print("| generate routings/s | scoring routings/s | speed-up (target >= 10) | 7-λ sweep / one pass (target <= 2) "
          "| old 7-λ sweep / new 7-λ sweep |")
    print("|---|---|---|---|---|")
    print(f"| {data['generate_routings_per_s']:.2f} | {data['scoring_routings_per_s']:.2f} | "
          f"{data['speedup_scoring_vs_generate']:.2f}x | {data['sweep_7_lambdas_over_one_pass']:.2f} | "
          f"{data['generate_sweep_7_lambdas_over_scoring_sweep']:.1f}x |\n")


def loglik_levers() -> None:
    data = json.loads((RESULTS / "loglik_levers.json").read_text())
    print(f"### Multiple-choice answering levers (`results/loglik_levers.json`, {data['queries']} queries)\n")
    print(conditions_line(data["conditions"]) + "\n")
    print("| model | loglik shared+batched s/q | loglik unshared s/q | generate direct s/q | vs unshared | vs generate "
          "| same choices | loglik accuracy |")
    print("|---|---|---|---|---|---|---|---|")
    for name, m in data["models"].items():
        s = m["s_per_query"]
        print(f"| {name} | {s['loglik_shared_batched']:.3f} | {s['loglik_unshared']:.3f} | {s['generate_direct']:.3f} | "
              f"{m['speedup_vs_unshared']:.2f}x | {m['speedup_vs_generate']:.2f}x | {m['same_choices_as_unshared']} | "
              f"{m['loglik_accuracy']:.3f} |")
    print()


def end_to_end(file_name: str, title: str) -> None:
    data = json.loads((RESULTS / file_name).read_text())
    if "stages_s" not in data or "total_s" not in data:
        return  # an older hand-assembled record
    print(f"### {title} (`results/{file_name}`)\n")
    print("| stage | s |\n|---|---|")
    for stage, seconds in data["stages_s"].items():
        print(f"| {stage} | {seconds} |")
    print(f"| **total** | **{data['total_s']}** ({data['ratio_to_target']:.2f} of the {data['target_s'] // 60}-min "
          f"target; load {data['load_avg_1m_before']} before, {data['cpus']} CPUs) |\n")


def dask_tournament(file_name: str) -> None:
    data = json.loads((RESULTS / file_name).read_text())
    s, d, r, a, t = data["serial"], data["dask"], data["ratios"], data["agreement"], data["targets"]
    subset = f", the first {data['per_task']} queries of each task" if data.get("per_task") else ""
    print(f"### Tournament on Dask vs serial (`results/{file_name}`: {data['pool']}{subset}, {data['queries']} "
          f"queries x {data['candidates']} candidates, {data['models']} models; {data['dask_workers']} workers x "
          f"{data['threads_per_worker']} thread, torch threads {data['torch_threads_param']})\n")
    c = data["conditions"]
    print(conditions_line(c) + f" Load average between the runs: {c.get('load_avg_1m_between')}.\n")
    print("| run | wall s | CPU s (all processes) | sum of per-query energy_j | shard jobs | model loads "
          "| load s | load J | energy source |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, run in (("serial", s), ("Dask", d)):
        print(f"| {name} | {run['wall_s']} | {run['cpu_s_all_processes']} | {run['energy_j_sum']} | {run['jobs']} | "
              f"{run['model_loads']} | {run['load_time_s']} | {run['load_energy_j']} | "
              f"{', '.join(run['energy_source'])} |")
    print(f"\nDask / serial: wall time **{r['wall_dask_over_serial']}x** (target <= {t['wall_ratio_max']}), "
          f"per-query energy **{r['energy_dask_over_serial']}x** (target {t['energy_ratio_band'][0]}-"
          f"{t['energy_ratio_band'][1]}), CPU time {r['cpu_dask_over_serial']}x; model loads {d['model_loads']} "
          f"(target <= {t['model_loads_max']}). Same `correct` on {a['same_correct']:.1%} of {a['pairs_matched']} "
          f"pairs, same `output_tokens` on {a['same_output_tokens']:.1%}, same text on {a['same_output_text']:.1%}, "
          f"{a['duplicates_dask']} duplicates.\n")


def all_tables() -> None:
    for path in sorted(RESULTS.glob("batching*.json")):
        batching(path.name)
    meter_overhead()
    router_scoring()
    loglik_levers()
    end_to_end("end_to_end.json", "`make run` stage by stage")
    end_to_end("study_end_to_end.json", "`make study` stage by stage")
    for path in sorted(RESULTS.glob("dask_tournament*.json")):
        dask_tournament(path.name)


def write_readme() -> None:
    """Replace the generated block of benchmarks/README.md with the tables of results/*.json."""
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        all_tables()
    readme = RESULTS.parent / "README.md"
    text = readme.read_text()
    begin = text.index("<!-- report:begin")
    begin = text.index("\n", begin) + 1
    end = text.index("<!-- report:end -->")
    readme.write_text(text[:begin] + "\n" + buffer.getvalue().strip() + "\n\n" + text[end:])


if __name__ == "__main__":
    try:
        write_readme() if sys.argv[1:] == ["--readme"] else all_tables()
    except FileNotFoundError as error:
        print(f"(no results yet: {error.filename})\n")
