"""A router's overhead is measured once per machine and router, then reused: an evaluation that differs
only in λ (or runs while another job loads the CPU) reports the same overhead for the same queries.

The scores come from a real kNN router (hashing embedder) metered with the real CPU-time estimate.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd

from jouleroute.energy.estimate import EstimateMeter
from jouleroute.evaluation.overhead import cache_key, stable_overhead
from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.routing.registry import build_router


def _router_and_queries():
    rows, queries = [], []
    for i in range(12):
        queries.append({"query_id": f"q{i}", "task": "arith", "split": "train" if i < 8 else "test",
                        "question": f"what is {i} plus {3 * i} when both are added together"})
        for cand, joules in (("small", 1.0), ("large", 9.0)):
            rows.append({"query_id": f"q{i}", "candidate_id": cand, "task": "arith", "split": queries[-1]["split"],
                         "correct": int(cand == "large" or i % 2 == 0), "energy_j": joules,
                         "energy_source": "estimated", "input_tokens": 12, "output_tokens": 4})
    queries = pd.DataFrame(queries)
    cfg = BaselinesConfig(embedding={"model": "hashing", "cache_dir": None}, knn={"k": 3})
    meter = EstimateMeter()
    router = build_router("knn", pd.DataFrame(rows), queries, ["small", "large"], cfg, meter=meter)
    return router, queries[queries["split"] == "test"].reset_index(drop=True), meter


def test_the_overhead_measured_first_is_reused_under_load(tmp_path):
    router, test, meter = _router_and_queries()
    key = cache_key("knn", {"k": 3}, meter.source, meter.device_info())
    first = stable_overhead(router.score(test), key, tmp_path)
    assert all(e > 0 for e in first.overhead_energy_j)  # really metered (CPU time x W per core)
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])  # another job takes a core
    try:
        again = stable_overhead(router.score(test), key, tmp_path)
    finally:
        burner.kill()
        burner.wait()
    assert again.overhead_energy_j == first.overhead_energy_j
    assert again.overhead_latency_s == first.overhead_latency_s
    recorded = json.loads(next(tmp_path.glob("knn-*.json")).read_text())
    assert recorded["key"]["machine"]["cpu_watts_per_core"] == meter.cpu_watts_per_core
    assert {"measured_at", "load_avg_1min"} <= set(recorded["queries"]["q8"])


def test_new_queries_and_other_settings_are_measured(tmp_path):
    router, test, meter = _router_and_queries()
    key = cache_key("knn", {"k": 3}, meter.source, meter.device_info())
    head = stable_overhead(router.score(test.iloc[:2]), key, tmp_path)
    scores = router.score(test)
    whole = stable_overhead(scores, key, tmp_path)
    assert whole.overhead_energy_j[:2] == head.overhead_energy_j  # kept
    assert whole.overhead_energy_j[2:] == scores.overhead_energy_j[2:]  # measured now, then kept
    other = cache_key("knn", {"k": 5}, meter.source, meter.device_info())  # another router: its own figures
    assert stable_overhead(scores, other, tmp_path).overhead_energy_j == scores.overhead_energy_j
    assert len(list(tmp_path.glob("knn-*.json"))) == 2
