"""The tables of the serving benchmarks (benchmarks/report.py prints them): the gateway under load in router and
cascade mode, capture, hot reload, the loop by hand, and every fault measured under load.
"""

from __future__ import annotations

import json

from _common import RESULTS
from report_format import conditions_line, counts, optional


def gateway_load() -> None:
    data = json.loads((RESULTS / "gateway_load.json").read_text())
    print(f"### Gateway under load (`results/gateway_load.json`, {data['upstreams']})\n")
    print(conditions_line(data["conditions"]) + f" LM router torch threads: {data.get('lm_threads')}.\n")
    print("| router | load | requests | errors | sustained req/s | routing p50 s | routing p95 s | router pass p95 s "
          "| gateway p95 s | direct p95 s | added p95 s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in data["routers"].values():
        g, d = r["gateway"], r["direct"]
        load = (f"{r['offered_rate_rps']:g}/s open loop" if r.get("offered_rate_rps")
                else f"{data['concurrency']} in flight")
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
                     f"positive and negative cases; {' and '.join(f.get('gateways') or ['router'])} mode)",
                     "one at a time", f["cases"],
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
        print(f"Fuzz: {per + ' cases; ' if per else ''}statuses {counts(f['statuses'])} in {f['wall_s']:g} s, "
              f"seed {f['seed']}, at most {f['examples_per_operation_and_mode']} cases per operation and mode. "
              + conditions_line(f["conditions"]) + "\n")
    if d := found.get("dask_kill"):
        print(f"Dask: the first run {'completed' if d['first_run_completed'] else 'failed'} after the kill "
              f"({d['first_run_state']}), the rerun wrote {d['shards_written_by_rerun']} shard(s); "
              f"{d['answers_differing_from_serial']} answers differ from the serial run's; worker processes "
              f"restarted: {d['worker_restarted']}. " + conditions_line(d["conditions"]) + "\n")
