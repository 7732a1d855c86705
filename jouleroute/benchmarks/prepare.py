"""Stage ``prepare``: sample queries from each benchmark, split them, write the query table.

Sampling and splitting hash ``seed`` with each query id instead of shuffling a list, so the
same config gives byte-identical output and a query keeps its place when others are added:
raising a sample size only appends queries, and a query's split depends on its id alone
(except for the few moved to fill an empty split, see :func:`assign_splits`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pyarrow as pa

from jouleroute.atomic import atomic_write_table
from jouleroute.benchmarks.config import PrepareConfig, SplitFractions
from jouleroute.benchmarks.reading import BenchmarkDataError
from jouleroute.benchmarks.registry import TASK_NAMES, Task, get_task
from jouleroute.schema import QUERY_COLUMNS, QUERY_SCHEMA, SPLITS

log = logging.getLogger(__name__)


def unit_hash(seed: int, purpose: str, key: str) -> float:
    """A stable pseudo-random number in [0, 1) for (seed, purpose, key)."""
    digest = hashlib.sha256(f"{seed}:{purpose}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def sample_docs(docs: list[dict], n: int, seed: int, by_subtask: bool) -> list[dict]:
    """``n`` documents in hash order; with ``by_subtask``, round-robin over subtasks (themselves
    in hash order) so any ``n`` >= the number of subtasks covers every one."""
    ranked = sorted(docs, key=lambda d: unit_hash(seed, "sample", d["query_id"]))
    if not by_subtask:
        return ranked[:n]
    groups: dict[str, list[dict]] = defaultdict(list)
    for doc in ranked:
        groups[doc["subtask"]].append(doc)
    order = sorted(groups, key=lambda s: unit_hash(seed, "subtask", s))
    picked: list[dict] = []
    for depth in range(max(len(g) for g in groups.values())):
        for subtask in order:
            if len(picked) < n and depth < len(groups[subtask]):
                picked.append(groups[subtask][depth])
    return picked


def assign_splits(query_ids: list[str], fractions: SplitFractions, seed: int) -> dict[str, str]:
    """Split by hash thresholds, then make sure every split with a non-zero fraction holds at
    least one of these queries (when there are enough): an empty split takes the query whose
    hash lies nearest its interval, from the currently largest split."""
    shares = [getattr(fractions, s) for s in SPLITS]
    edges = [sum(shares[:i]) for i in range(len(SPLITS) + 1)]
    u = {q: unit_hash(seed, "split", q) for q in query_ids}
    split = {q: SPLITS[next((i for i in range(len(SPLITS)) if u[q] < edges[i + 1]), len(SPLITS) - 1)]
             for q in sorted(query_ids)}
    wanted = [s for s, share in zip(SPLITS, shares) if share > 0]
    if len(query_ids) < len(wanted):
        return split
    for index, name in enumerate(SPLITS):
        if name not in wanted or name in split.values():
            continue
        members = {s: [q for q in split if split[q] == s] for s in SPLITS}
        donor = max(SPLITS, key=lambda s: (len(members[s]), -SPLITS.index(s)))
        low, high = edges[index], edges[index + 1]
        moved = min(members[donor], key=lambda q: (max(low - u[q], u[q] - high, 0.0), q))
        split[moved] = name
    return split


def _load(task: Task, cfg: PrepareConfig, data_dir: Path) -> list[dict]:
    if cfg.source == "hf":
        from jouleroute.benchmarks.hf import load_hf_docs  # network only when asked for

        return load_hf_docs(task, cfg.hf.get(task.name, task.hf.dataset_id))
    root = Path(cfg.local_dir) if cfg.source == "local" else Path(data_dir)
    return task.load(root)


def build_queries(cfg: PrepareConfig, data_dir: Path) -> pa.Table:
    """The query table for ``cfg``: tasks in canonical order, queries sorted by id."""
    records: list[dict] = []
    for name in TASK_NAMES:
        if name not in cfg.samples:
            continue
        task, n = get_task(name), cfg.samples[name]
        docs = _load(task, cfg, data_dir)
        if n > len(docs):
            raise BenchmarkDataError(
                f"prepare.samples.{name} = {n}, but source '{cfg.source}' has only {len(docs)} {name} queries; "
                "lower it, or set source 'local' with local_dir pointing at the full set"
            )
        picked = sample_docs(docs, n, cfg.seed, by_subtask=task.fewshot_by_subtask)
        splits = assign_splits([d["query_id"] for d in picked], cfg.split, cfg.seed)
        for doc in sorted(picked, key=lambda d: d["query_id"]):
            record = {column: doc.get(column) for column in QUERY_COLUMNS}
            record["split"] = splits[doc["query_id"]]
            record["choices_json"] = json.dumps(doc["choices"], ensure_ascii=False)
            records.append(record)
        log.info("prepare: %s: %d of %d queries", name, n, len(docs))
    # Built from plain lists, not pandas, so no pandas-version metadata makes the bytes vary.
    return pa.Table.from_pylist(records, schema=QUERY_SCHEMA)


def run_prepare(cfg: PrepareConfig, data_dir: Path, out_path: Path) -> pd.DataFrame:
    """Write the query table (parquet, QUERY_SCHEMA) to ``out_path`` and return it.

    ``data_dir`` is the benchmark folder of the data root (``paths.data_dir``); pass it repo-relative,
    since it is recorded in ``source_file``. Same config and data -> byte-identical file.
    """
    table = build_queries(cfg, Path(data_dir))
    out_path = Path(out_path)
    atomic_write_table(table, out_path)  # a killed prepare never leaves a torn query table behind
    frame = table.to_pandas()
    counts = frame.groupby(["task", "split"]).size().to_dict()
    log.info("prepare: wrote %d queries to %s; per (task, split): %s", len(frame), out_path, counts)
    return frame
