"""Render results/*.json as the markdown tables quoted in benchmarks/README.md.

    .venv/bin/python benchmarks/report.py [--readme | --check]

``--readme`` writes the tables into benchmarks/README.md and the set-up figures into README.md's setup-figures
block; ``--check`` writes nothing and exits 1 when either is not what results/*.json give.
"""

from __future__ import annotations

import json
import sys

from _common import RESULTS


def optional(file_name: str) -> dict | None:
    """A result file of RESULTS, or None when that benchmark has not been run on this machine."""
    path = RESULTS / file_name
    return json.loads(path.read_text()) if path.is_file() else None


def conditions_line(c: dict) -> str:
    return (
        f"_{c['when']}, git {c['git_sha']}, {c['logical_cpus']} logical CPUs"
        + (f" ({c['cpu_model']}, bf16 matrix units {'yes' if c.get('cpu_bf16') else 'no'})" if c.get("cpu_model") else "")
        + f", torch threads {c['torch_threads']}, "
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


def router_scoring(file_name: str) -> None:
    data = json.loads((RESULTS / file_name).read_text())
    if "full" not in data:
        return  # the generate()-era record, before the fast router
    full, fast, plain, same = data["full"], data["fast"], data["fast_without_prefix_cache"], data["prefix_cache_vs_uncached"]
    print(f"### LM router: full vs fast scoring (`results/{file_name}`, {data['queries']} test queries)\n")
    print(conditions_line(data["conditions"]) + "\n")
    dtype = fast.get("dtype", "float32")
    print("| router | layers | dtype | head | prefix cache | query budget | mean prompt tokens | routings/s | routings/CPU-s |")
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
             f"{twin['max_diff_over_spread']:.2g} of their spread, top candidate differs on {twin['top_candidate_differs']} "
             f"of {twin['queries']} queries (on trained routers: docs/router-training.md)."
             if (twin := data.get("fast_vs_fp32_twin")) else "") + "\n")


def gateway_load() -> None:
    data = json.loads((RESULTS / "gateway_load.json").read_text())
    print(f"### Gateway under load (`results/gateway_load.json`, {data['upstreams']})\n")
    print(conditions_line(data["conditions"]) + f" LM router torch threads: {data.get('lm_threads')}.\n")
    print("| router | load | requests | errors | sustained req/s | routing p50 s | routing p95 s | router pass p95 s "
          "| gateway p95 s | direct p95 s | added p95 s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in data["routers"].values():
        g, d = r["gateway"], r["direct"]
        load = f"{r['offered_rate_rps']:g}/s open loop" if r.get("offered_rate_rps") else f"{data['concurrency']} in flight"
        name = r["router"] + (f" ({r['router_dir']}, precision {r['lm_precision']})" if r.get("lm_precision") else "")
        print(f"| {name} | {load} | {g['requests']} | {g['errors']} | {g.get('sustained_rps')} | "
              f"{r['routing_overhead_p50_s']} | {r['routing_overhead_p95_s']} | {r.get('router_pass_p95_s')} | "
              f"{g['p95_s']} | {d['p95_s']} | {r['added_p95_s']} |")
    for r in data["routers"].values():
        for cause, count in r["gateway"].get("error_causes", {}).items():
            print(f"\n{r['router']}: {count} x {cause[:160]}")
        if "targets_sustained_met" in r:
            print(f"\n{r['router']}: sustained-rate targets (>= 20 req/s, routing p95 <= 0.1 s) "
                  f"{'met' if r['targets_sustained_met'] else 'not met'}.")
    print()


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
    c = data.get("conditions") or {}
    during = c.get("load_avg_1m_during_run")
    print(f"| **total** | **{data['total_s']}** ({data['ratio_to_target']:.2f} of the {data['target_s'] // 60}-min "
          f"target; load {data['load_avg_1m_before']} before"
          + (f", {during['mean']} during the run (max {during['max']})" if during else "")
          + f", {data['cpus']} CPUs" + (f", git {c['git_sha']}" if c.get("git_sha") else "") + ") |\n")
    if data.get("source"):
        print(f"From {data['source']}.\n")


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


def gpu_conditions(c: dict) -> str:
    return f"_{c['when']}, git {c['git_sha']}, {c['gpu']}, CUDA {c['cuda']}, torch {c['torch']}, Python {c['python']}._"


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


def cascade_gateway() -> None:
    data = json.loads((RESULTS / "cascade_gateway.json").read_text())
    chain = " > ".join("+".join(stage) for stage in data["chain"])
    print(f"### Gateway in cascade mode (`results/cascade_gateway.json`, chain `{chain}`, {data['upstreams']})\n")
    print(conditions_line(data["conditions"]) + "\n")
    g, d = data["gateway"], data["direct"]
    stops = ", ".join(f"{stage} {100 * share:.0f}%" for stage, share in data["stop_share"].items())
    print("| offered req/s | requests | errors | stopped at | gateway's own p50 / p95 / max s | gateway p95 s "
          "| direct p95 s | added p95 s | CPU ms/request | totals not the sum of calls | targets met |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {data['offered_rate_rps']:g} | {g['requests']} | {g['errors']} | {stops} | {data['gateway_own_p50_s']} / "
          f"{data['gateway_own_p95_s']} / {data['gateway_own_max_s']} | {g['p95_s']} | {d['p95_s']} "
          f"| {data['added_p95_vs_direct_s']} | {data['gateway_cpu_ms_per_request']} "
          f"| {data['joules_total_not_sum_of_calls']} | {'yes' if data['target_met'] else 'no'} |")
    print()


def capture() -> None:
    """Capture under load (bench_capture.py, issue 49): its p95 cost, and what a kill -9 loses."""
    data = optional("capture.json")
    if data is None:
        return
    o, d = data["overhead"], data["durability"]
    print(f"### Capture under load (`results/capture.json`, {data['rate_per_s']:g} requests/s, answers of "
          f"{data['answer_ms']:g} ms)\n")
    print(conditions_line(data["conditions"]) + "\n")
    print("| p95 capture off s | p95 capture on s | on / off (target <= 1.05) | answered off / on "
          "| kill -9 after s: answered / captured / lost / torn lines | after restart: answered, records, duplicates "
          "| targets met |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {o['p95_off_s']:.4f} | {o['p95_on_s']:.4f} | {o['p95_ratio']:.3f} | {o['answered_off']} / "
          f"{o['answered_on']} | {data['kill_after_s']:g}: {d['answered_before_kill']} / {d['captured_before_kill']} / "
          f"{d['lost_at_kill']} / {d['torn_lines']} | {d['answered_after_restart']}, {d['records_final']}, "
          f"{d['duplicates_final']} | {'yes' if o['met'] and d['met'] else 'no'} |")
    print()


def loop_run() -> None:
    """The loop by hand on the embedded default (bench_loop.py, issue 49): traffic, the decision, the reload window."""
    data = optional("loop_run.json")  # loop_run-quick.json, a smoke run, is not reported
    if data is None:
        return
    t, w, d, v = data["traffic"], data["window"], data["decision"], data["versions"]
    print(f"### The loop by hand (`results/loop_run.json`, {data['requests']} requests, then one iteration under "
          f"{data['rate_per_s']:g} requests/s)\n")
    print(conditions_line(data["conditions"]) + "\n")
    print("| served: answered / failed | captured (torn, dup) | first served | iteration s | decision | acc diff "
          "| J ratio | version changed | window: requests / failed / hung | by version | target met |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    signed = lambda x: "" if x is None else f"{x:+.3f}"  # noqa: E731
    by_version = ", ".join(f"{k}: {n}" for k, n in sorted(w.get("by_version", {}).items()))
    ratio = "" if d["energy_ratio"] is None else f"{d['energy_ratio']:.3f}"
    print(f"| {t['answered']} / {t['failed']} | {data['capture']['records']} ({data['capture']['torn_lines']}, "
          f"{data['capture']['duplicates']}) | {data['first_served'].split(':')[0]} | {data['iteration']['wall_s']:g} "
          f"| {d['decision']} | {signed(d['accuracy_diff'])} | {ratio} "
          f"| {'yes' if v['changed'] else 'no'} | {w.get('requests', 0)} / {w.get('failed', 0)} / {w.get('hangs', 0)} "
          f"| {by_version} | {'yes' if w.get('met') else 'no'} |")
    print()


def reload() -> None:
    """Hot reload under load (bench_reload.py, issue 49): policy swaps and a SIGHUP under open-loop traffic."""
    data = optional("reload.json")
    if data is None:
        return
    c, cap = data["conditions"], data["capture"]
    print(f"### Hot reload under load (`results/reload.json`, {data['rate_per_s']:g} requests/s for "
          f"{data['seconds']:g} s, {data['swaps']} swaps and one SIGHUP, reload_poll_s {data['reload_poll_s']:g}, "
          f"upstreams answering at once)\n")
    print(conditions_line(c) + f" Usable cores {c['usable_cpus']}.\n")
    print("| sent | answered | failed | hung | by version | unexpected versions | swap: first new answer after s "
          "(old answers after it) | capture: records / torn / duplicates / answered not captured / version differs "
          "| target met |")
    print("|---|---|---|---|---|---|---|---|---|")
    names = {v: k for k, v in data["versions"].items()}
    by_version = ", ".join(f"{names.get(v, v)}: {n}" for v, n in sorted(data["by_version"].items(),
                                                                        key=lambda kv: names.get(kv[0], kv[0])))
    swaps = ", ".join(f"{e['event']} {names.get(e['to'], e['to'])}: {e['first_new_answer_after_s']} "
                      f"({e['old_after_first_new']})" for e in data["events"] if e["event"] != "sighup")
    print(f"| {data['sent']} | {data['answered']} | {data['failed']} | {data['hung']} | {by_version} "
          f"| {len(data['unexpected_versions'])} | {swaps} | {cap['records']} / {cap['torn_lines']} / "
          f"{cap['duplicates']} / {cap['answered_not_captured']} / {cap['version_differs_from_header']} "
          f"| {'yes' if data['met'] else 'no'} |")
    print()
    print(f"Latency by when the request was sent (the {data['window_s']:g} s after an event are 'during' it):\n")
    print("| phase | requests | p50 s | p95 s | max s |")
    print("|---|---|---|---|---|")
    for phase, p in data["latency"].items():
        if p["requests"]:
            print(f"| {phase} | {p['requests']} | {p['p50_s']} | {p['p95_s']} | {p['max_s']} |")
    print()


def faults() -> None:
    """One table of every fault measured under load (bench_faults.py, bench_fuzz.py, bench_dask_kill.py)."""
    found = {name: json.loads(path.read_text()) for name in ("faults", "fuzz", "dask_kill")
             if (path := RESULTS / f"{name}.json").is_file()}
    if not found:
        return
    print("### Faults under load (`results/faults.json`, `results/fuzz.json`, `results/dask_kill.json`)\n")
    print("Targets (issue 50): 0 hangs, 0 server errors, 0 lost and 0 duplicated records in every row; the fuzz "
          "tries >= 1,000 cases. _Ended well_: a whole answer (the chosen candidate's, or the fallback's, or the "
          "cascade's) or, for the Dask run, a pair in the profile. _Clean errors_: a 502/504, or an error event "
          "ending a stream already under way, that names the failed upstream. _Server errors_: any other 5xx, a "
          "stream cut without an error event, a fuzz case answered 5xx. _Lost_ / _duplicated_: requests with no "
          "line, or two, in the gateway's access log; fuzz cases not answered; pairs missing from the profile, or "
          "written twice.\n")
    print("| fault | load | requests | ended well | of which fell back / escalated | clean errors | hangs "
          "| server errors | lost | duplicated | git | met |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for fault, r in (found.get("faults", {}).get("router") or {}).items():
        what = ("SIGKILL" if fault == "kill" else "SIGSTOP (frozen: only timeouts end its requests)")
        for kind in ("streaming", "non_streaming"):
            c = r["classes"].get(kind, {})
            n = sum(c.values())
            rows.append((f"router mode, upstream `{r['victim']}` {what} at {r['fault_at_s']:.1f} s, "
                         f"{kind.replace('_', '-')}",
                         f"{r['concurrency']} in flight", n, c.get("answered", 0) + c.get("fallback", 0),
                         c.get("fallback", 0), c.get("clean_error", 0), c.get("hang", 0), c.get("other", 0),
                         r["records"]["missing"], r["records"]["duplicated"], r["conditions"]["git_sha"],
                         c.get("hang", 0) == 0 and c.get("other", 0) == 0 and not r["records"]["missing"]
                         and not r["records"]["duplicated"]))
    if c := (found.get("faults") or {}).get("cascade"):
        rows.append((f"cascade mode `{' > '.join('+'.join(s) for s in c['chain'])}`, stage-1 upstream `a` SIGKILL "
                     f"at {c['fault_at_s']:.1f} s", f"{c['offered_rate_rps']:g}/s open loop", c["requests"],
                     c["answered"], c["escalations_total"], 0, c["hangs"], c["lost"] - c["hangs"],
                     c["lost"] + c["records"]["missing"], c["records"]["duplicated"], c["conditions"]["git_sha"],
                     c["met"] and not c["records"]["missing"] and not c["records"]["duplicated"]))
    if f := found.get("fuzz"):
        rows.append((f"schema-driven fuzz (schemathesis {f['schemathesis']}, the gateway's `/openapi.json`, "
                     f"positive and negative cases; {' and '.join(f.get('gateways') or ['router'])} mode)", "one at a time", f["cases"],
                     f["cases"] - f["server_errors"] - f["unanswered"], "-", "-", "-", f["server_errors"],
                     f["unanswered"], "-", f["conditions"]["git_sha"], f["met"]))
    if d := found.get("dask_kill"):
        rows.append((f"tournament on Dask ({d['workers']} workers), a worker SIGKILL after {d['shards_at_kill']} "
                     f"of {d['shards_final']} shards", f"{d['queries']} queries x {d['candidates']} candidates",
                     d["pairs_expected"], d["pairs_in_profile"] - d["pairs_twice_in_profile"], "-", "-", "-", "-",
                     d["pairs_missing"], d["pairs_twice_in_profile"] + d["shard_rows_written_twice"],
                     d["conditions"]["git_sha"], d["met"]))
    for row in rows:
        print("| " + " | ".join(("yes" if v else "**no**") if isinstance(v, bool) else str(v) for v in row) + " |")
    print()
    if r := (found.get("faults") or {}).get("router"):
        for fault, x in r.items():
            print(f"Router mode, {fault}: {x['requests']} requests ({x['concurrency']} in flight, half streaming), "
                  f"answers of {x['answer_s']:g} s, each upstream's `timeout_s` {x['upstream_timeout_s']:g} s; "
                  f"{x['streams_cut_mid_answer']} streams were cut mid-answer (ended by an error event naming the "
                  f"upstream); the slowest request of each class took "
                  + ", ".join(f"{k} {v:g} s" for k, v in sorted(x["latency_max_s_by_class"].items()))
                  + f" (a hang is no end within {x['client_limit_s']:g} s). " + conditions_line(x["conditions"]))
            print()
    if c := (found.get("faults") or {}).get("cascade"):
        print(f"Cascade mode: escalations {counts(c['escalations'])} (the gateway's `/metrics` agree: "
              f"{'yes' if c['escalations_agree_with_metric'] else 'no'}); answers by stage before the kill "
              f"{counts(c['stops']['before_kill'])}, after {counts(c['stops']['after_kill'])}; "
              f"{c['calls_to_victim_failed']} calls "
              f"to `a` failed and counted as no answer; slowest request {c['latency_max_s']:g} s. "
              + conditions_line(c["conditions"]) + "\n")
    if f := found.get("fuzz"):
        per = ", ".join(f"the {mode} gateway {g['cases']}" for mode, g in (f.get("gateways") or {}).items())
        print(f"Fuzz: {per + ' cases; ' if per else ''}statuses {counts(f['statuses'])} in {f['wall_s']:g} s, seed {f['seed']}, at most "
              f"{f['examples_per_operation_and_mode']} cases per operation and mode. " + conditions_line(f["conditions"])
              + "\n")
    if d := found.get("dask_kill"):
        print(f"Dask: the first run {'completed' if d['first_run_completed'] else 'failed'} after the kill "
              f"({d['first_run_state']}), the rerun wrote {d['shards_written_by_rerun']} shard(s); "
              f"{d['answers_differing_from_serial']} answers differ from the serial run's; worker processes "
              f"restarted: {d['worker_restarted']}. " + conditions_line(d["conditions"]) + "\n")


def counts(d: dict) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in d.items()) or "none"


def gib(n: int) -> str:
    return f"{n / 1024**3:.2f} GiB" if n >= 1024**3 else f"{n / 1024**2:.0f} MiB"


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
          f"torch's among them) lay on this machine's disk and {w.get('from_network')} ({gib(w.get('from_network_bytes', 0))})"
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


def all_tables() -> None:
    for path in sorted(RESULTS.glob("batching*.json")):
        batching(path.name)
    meter_overhead()
    for path in sorted(RESULTS.glob("router_scoring*.json")):
        router_scoring(path.name)
    gateway_load()
    cascade_gateway()
    loglik_levers()
    setup_figures()
    end_to_end("end_to_end.json", "`make run` stage by stage")
    end_to_end("study_end_to_end.json", "`make study` stage by stage")
    for path in sorted(RESULTS.glob("dask_tournament*.json")):
        dask_tournament(path.name)
    for path in sorted(RESULTS.glob("meter_nvml*.json")):
        meter_nvml(path.name)
    for path in sorted(RESULTS.glob("gpu_check*.json")):
        gpu_check(path.name)
    faults()
    capture()
    reload()
    loop_run()


def write_readme(check: bool = False) -> int:
    """Replace the generated block of benchmarks/README.md with the tables of results/*.json (and the set-up block
    of README.md). ``check``: write nothing; 1 when either block is not what the results give."""
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
    wanted = text[:begin] + "\n" + buffer.getvalue().strip() + "\n\n" + text[end:]
    stale = [readme.name] if wanted != text else []
    if not check:
        readme.write_text(wanted)
    stale += write_setup_block(check)
    if stale:
        print(f"out of date with benchmarks/results: {', '.join(stale)}; run `.venv/bin/python benchmarks/report.py "
              "--readme`" if check else f"wrote {', '.join(stale)}")
    return 1 if check and stale else 0


SETUP_BEGIN = "<!-- generated:setup-figures:begin (benchmarks/report.py) -->"
SETUP_END = "<!-- generated:setup-figures:end -->"


def write_setup_block(check: bool = False) -> list[str]:
    """The set-up figures into the top-level README.md, between its markers (only there: the rest is hand-written);
    ``["README.md"]`` when the block changed (``check``: would change)."""
    import contextlib
    import io

    readme = RESULTS.parents[1] / "README.md"
    text = readme.read_text()
    if SETUP_BEGIN not in text or SETUP_END not in text or not (RESULTS / "setup.json").is_file():
        print(f"README.md: no {SETUP_BEGIN} ... {SETUP_END} block, or no results/setup.json: left as it is")
        return []
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        setup_figures(heading=None)
    begin = text.index(SETUP_BEGIN) + len(SETUP_BEGIN)
    end = text.index(SETUP_END)
    wanted = text[:begin] + "\n" + buffer.getvalue().strip() + "\n" + text[end:]
    if wanted == text:
        return []
    if not check:
        readme.write_text(wanted)
    return ["README.md (setup-figures block)"]


if __name__ == "__main__":
    try:
        if sys.argv[1:] in (["--readme"], ["--check"]):
            sys.exit(write_readme(check=sys.argv[1] == "--check"))
        all_tables()
    except FileNotFoundError as error:
        print(f"(no results yet: {error.filename})\n")
