"""A router's own overhead, measured once per machine and router, then reused by every evaluation.

The overhead (energy and latency of scoring each test query) is metered while the router runs. On a
machine shared with other jobs the same work reads as more: with the CPU-time estimate, torch's
threads spin while a peer waits for a core, so an experiment run under load showed a J/query 36 %
higher for the same router point (issue 22). λ does not change what a router computes (it reads each
query once, whatever λ), so an evaluation that differs only in λ must see the same overhead.

The first evaluation on a machine measures it per query and keeps it in ``cache_dir``, under a key of
what the cost depends on: the router's architecture and inference settings (never λ or the trained
weights), and the meter with the machine it reads. Later evaluations reuse those figures; only queries
never measured are measured. The cache records when and under what load it was measured. To measure
again (e.g. on a quiet machine), delete the folder.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from pathlib import Path

from jouleroute.atomic import atomic_write_text
from jouleroute.routing.scores import Scores

logger = logging.getLogger(__name__)


def cache_key(router: str, settings: dict, meter_source: str, machine: dict) -> dict:
    """What a router's per-query overhead depends on. ``settings`` must leave out λ and trained weights."""
    return {"router": router, "settings": settings, "meter": meter_source, "machine": machine}


def stable_overhead(scores: Scores, key: dict, cache_dir: Path) -> Scores:
    """``scores`` with the overhead first measured for ``key`` on these queries (new queries: this run's)."""
    if len(scores.overhead_energy_j) != len(scores.query_ids):  # a zero-cost router states none
        return scores
    name = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"{key['router']}-{name}.json"
    cached = json.loads(path.read_text()) if path.exists() else {"key": key, "queries": {}}
    known = cached["queries"]
    fresh = [q for q in scores.query_ids if q not in known]
    if fresh:
        measured_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        load = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
        for i, q in enumerate(scores.query_ids):
            if q not in known:
                known[q] = {"energy_j": scores.overhead_energy_j[i], "latency_s": scores.overhead_latency_s[i],
                            "measured_at": measured_at, "load_avg_1min": load}
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(cached, indent=1, default=str) + "\n")
    reused = len(scores.query_ids) - len(fresh)
    if reused:
        logger.info("%s: the overhead of %d of %d queries is the one measured before on this machine (%s); "
                    "delete it to measure again", key["router"], reused, len(scores.query_ids), path)
    return dataclasses.replace(scores, overhead_energy_j=[known[q]["energy_j"] for q in scores.query_ids],
                               overhead_latency_s=[known[q]["latency_s"] for q in scores.query_ids])
