"""The tables of the model-side benchmarks (benchmarks/report.py prints them): batching, meter overhead, router
scoring, multiple-choice levers, the tournament on Dask against serial, and the energy meters on a real GPU.
"""

from __future__ import annotations

import json

from _common import RESULTS
from report_format import conditions_line, gpu_conditions


def batching(file_name: str = "batching.json") -> None:
    data = json.loads((RESULTS / file_name).read_text())
    print(f"### Batching (`results/{file_name}`, {data['batch_size']} queries, "
          f"max_new_tokens {data['max_new_tokens']})\n")
    print(conditions_line(data["conditions"]) + "\n")
    print("| model | prompting | load s | batch 1 tok/s | batch 8 tok/s | speed-up | est. J/token b1 | est. J/token b8 "
          "| same text | prompt/generated token cost |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, m in data["models"].items():
        print(
            f"| {name} | {m['prompting']} | {m['load_s']} | {m['batch_1']['tokens_per_s']} | "
            f"{m['batch_8']['tokens_per_s']} | "
            f"{m['speedup']}x | {m['batch_1']['energy_j_per_output_token']} | "
            f"{m['batch_8']['energy_j_per_output_token']} | "
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
                f"| {name} | {m['source']} | {row['window_s']} | {row['overhead_us_median']} | "
                f"{row['overhead_us_p90']} | "
                f"{'-' if share is None else f'{share:.2%}'} |"
            )
    print()


def router_scoring(file_name: str) -> None:
    data = json.loads((RESULTS / file_name).read_text())
    if "full" not in data:
        return  # the generate()-era record, before the fast router
    full, fast, plain, same = (data["full"], data["fast"], data["fast_without_prefix_cache"],
                               data["prefix_cache_vs_uncached"])
    print(f"### LM router: full vs fast scoring (`results/{file_name}`, {data['queries']} test queries)\n")
    print(conditions_line(data["conditions"]) + "\n")
    dtype = fast.get("dtype", "float32")
    print("| router | layers | dtype | head | prefix cache | query budget | mean prompt tokens | routings/s "
          "| routings/CPU-s |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| full (main at 3261796) | {full['layers']} | float32 | {full['head']} | no | {full['max_query_tokens']} | "
          f"{data['mean_prompt_tokens']} | {full['routings_per_s']:.2f} | {full['routings_per_cpu_s']:.2f} |")
    print(f"| fast, no prefix cache | {fast['layers']} | {dtype} | {fast['head']} | no | {fast['max_query_tokens']} | "
          f"{fast['mean_prompt_tokens']} | {plain['routings_per_s']:.2f} | {plain['routings_per_cpu_s']:.2f} |")
    print(f"| fast | {fast['layers']} | {dtype} | {fast['head']} | {fast['prefix_tokens']} tokens | "
          f"{fast['max_query_tokens']} | {fast['mean_prompt_tokens']} | {fast['routings_per_s']:.2f} | "
          f"{fast['routings_per_cpu_s']:.2f} |")
    print(f"\nFast vs full: **{data['speedup_fast_vs_full']:.2f}x** by the wall clock "
          f"({data['speedup_fast_vs_full_cpu']:.2f}x by CPU time; target {data['targets']['speedup_fast_vs_full']}); "
          f"the prefix cache alone {data['speedup_prefix_cache']:.2f}x ({data['speedup_prefix_cache_cpu']:.2f}x). "
          f"Cached vs uncached label logits: max difference {same['max_abs_logit_diff']:.2g} "
          f"({same['max_diff_over_spread']:.2g} of their spread), top label differs on {same['top_label_differs']}."
          + (f" The fast router against the same checkpoint at fp32: scores differ by at most "
             f"{twin['max_diff_over_spread']:.2g} of their spread, top candidate differs on "
             f"{twin['top_candidate_differs']} "
             f"of {twin['queries']} queries (on trained routers: docs/router-training.md)."
             if (twin := data.get("fast_vs_fp32_twin")) else "") + "\n")


def loglik_levers() -> None:
    data = json.loads((RESULTS / "loglik_levers.json").read_text())
    print(f"### Multiple-choice answering levers (`results/loglik_levers.json`, {data['queries']} queries)\n")
    print(conditions_line(data["conditions"]) + "\n")
    print("| model | loglik shared+batched s/q | loglik unshared s/q | generate direct s/q | vs unshared | vs generate "
          "| same choices | loglik accuracy |")
    print("|---|---|---|---|---|---|---|---|")
    for name, m in data["models"].items():
        s = m["s_per_query"]
        print(f"| {name} | {s['loglik_shared_batched']:.3f} | {s['loglik_unshared']:.3f} | "
              f"{s['generate_direct']:.3f} | "
              f"{m['speedup_vs_unshared']:.2f}x | {m['speedup_vs_generate']:.2f}x | {m['same_choices_as_unshared']} | "
              f"{m['loglik_accuracy']:.3f} |")
    print()


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


def meter_nvml(file_name: str) -> None:
    """`jouleroute meter` on a real GPU (scripts/gpu_meter_check.py): the exporter against NVML in-process."""
    data = json.loads((RESULTS / file_name).read_text())
    info, scrape = data["exporter"]["device_info"], data["exporter"]["scrape_latency"]
    print(f"### `jouleroute meter` on a real GPU (`results/{file_name}`, scripts/gpu_check.sh --meter)\n")
    print(gpu_conditions(data["conditions"]) + "\n")
    print(f"Exporter source `{data['exporter']['source']}`, driver {info.get('driver_version')}, power limit "
          f"{data['power_limit_w']} W; idle power {data['idle_power_w']} W (the exporter's counter over an idle "
          f"window, before the model is loaded); one scrape (HTTP GET + prometheus-client's parser) median "
          f"{scrape['median_ms']} ms, p95 {scrape['p95_ms']} ms over {scrape['scrapes']}. Each window: one batch of "
          "generation with the transformers backend on the GPU (random-weight Llama, bf16), read three ways. "
          f"Failed checks: {len(data['failures'])}.\n")
    print("| repeat | max_new_tokens | output tokens | window s | exporter J | NVML in-process J | sampled power J "
          "| avg W | net J/output token |")
    print("|---|---|---|---|---|---|---|---|---|")
    for w in data["windows"]:
        print(f"| {w['repeat']} | {w['max_new_tokens']} | {w['output_tokens']} | {w['window_s']} | {w['exporter_j']} "
              f"| {w['in_process_j']} | {w['sampled_j']} | {w['avg_power_w']} | {w['net_j_per_output_token']} |")
    low, high = data["summary"]["exporter_over_in_process"]
    print(f"\nExporter / in-process: {low} to {high} (the two read the same counter; the exporter's window is "
          "widened by its two HTTP scrapes).\n")


def gpu_check(file_name: str) -> None:
    """scripts/gpu_check.py: Zeus windows around CUDA generation batches."""
    data = json.loads((RESULTS / file_name).read_text())
    info, model = data["device_info"], data["model"]
    print(f"### Zeus windows around CUDA generation (`results/{file_name}`, scripts/gpu_check.sh)\n")
    print(f"{', '.join(info.get('gpu_names', []))}, driver {info.get('driver_version')}; source `{data['source']}`, "
          f"idle power {round(data['idle_power_w'], 2)} W; model {model['parameters']:,} parameters "
          f"({model['layers']} layers, hidden {model['hidden']}, {model['dtype']}). "
          f"Failed checks: {len(data['failures'])}.\n")
    print("| window s | energy J | avg W | output tokens | J/output token | net J | sampled power J |")
    print("|---|---|---|---|---|---|---|")
    for w in data["windows"]:
        print(f"| {w['window_s']} | {w['energy_j']} | {w['avg_power_w']} | {w['output_tokens']} | "
              f"{w['energy_j_per_output_token']} | {w['energy_net_j']} | {w['sampled_power_energy_j']} |")
    print()
