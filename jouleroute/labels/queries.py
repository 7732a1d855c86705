"""A user's prompts as a query table: content-hashed ids, duplicates dropped, split by time or by a seed.

The table has the columns of the project's query table (``schema.QUERY_COLUMNS``) with ``gold`` null: nobody
graded these prompts. A query's id is ``<task>/<first 16 hex of the prompt's SHA-256>``, so the same prompt
gets the same id in every import and a repeated prompt is one query (its oldest occurrence, or its first line
without times).

Split: when every row carries a time, the oldest queries are train and the newest test, in the shares of
``prompts.split`` (what a deployed router meets is newer than what it learned from); when none does, the seeded
hash split of the ``prepare`` stage (``benchmarks.prepare.assign_splits``), per task. A file where only some rows
carry a time is an error naming the first row without one.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa

from jouleroute.benchmarks.config import SplitFractions
from jouleroute.benchmarks.prepare import assign_splits
from jouleroute.labels.config import PromptsConfig
from jouleroute.labels.prompts import PromptFileError, PromptRecord, read_prompt_records
from jouleroute.schema import QUERY_COLUMNS, QUERY_SCHEMA, SPLITS


@dataclass
class ImportedQueries:
    table: pa.Table  # QUERY_SCHEMA, gold null
    summary: dict = field(default_factory=dict)


def import_prompts(path: Path, cfg: PromptsConfig, source_file: str | None = None) -> ImportedQueries:
    """The query table of the prompts in ``path``; ``source_file`` (default: the path) is recorded on each row."""
    source_file = source_file or str(path)
    return query_table(read_prompt_records(path, cfg, source_file), cfg, source_file)


def prompt_query_id(task: str, prompt: str) -> str:
    return f"{task}/{hashlib.sha256(prompt.encode('utf-8')).hexdigest()[:16]}"


def query_table(records: list[PromptRecord], cfg: PromptsConfig, source_file: str) -> ImportedQueries:
    timed = [r.time_s is not None for r in records]
    if any(timed) and not all(timed):
        first = records[timed.index(False)]
        raise PromptFileError(f"{first.where}: no time ('created' or 'timestamp'), while other rows carry one: "
                              "give every row a time (a time-ordered split) or none (a seeded split)")
    by_time = all(timed)
    ordered = sorted(records, key=lambda r: (r.time_s, r.row)) if by_time else records
    unique: dict[str, PromptRecord] = {}
    for record in ordered:
        unique.setdefault(prompt_query_id(record.task, record.prompt), record)
    ids = list(unique)
    split = dict(zip(ids, time_ordered_splits(len(ids), cfg.split))) if by_time else _seeded_splits(unique, cfg)
    rows = [{"query_id": qid, "task": r.task, "subtask": "", "split": split[qid], "question": r.prompt,
             "choices_json": "[]", "gold": None, "source_file": source_file, "source_row": r.row}
            for qid, r in unique.items()]
    table = pa.Table.from_pylist(rows, schema=QUERY_SCHEMA).select(list(QUERY_COLUMNS))
    summary = {"file": source_file, "rows": len(records), "queries": len(ids),
               "duplicates_dropped": len(records) - len(ids), "split_rule": "time-ordered" if by_time else "seeded",
               "splits": {s: sum(1 for v in split.values() if v == s) for s in SPLITS},
               "tasks": dict(sorted(Counter(r.task for r in unique.values()).items())),
               "earlier_turns_dropped": sum(r.earlier_turns for r in unique.values())}
    if by_time:
        summary["time_range"] = {s: [_iso(min(t)), _iso(max(t))] for s in SPLITS
                                 if (t := [r.time_s for q, r in unique.items() if split[q] == s])}
    return ImportedQueries(table, summary)


def time_ordered_splits(n: int, fractions: SplitFractions) -> list[str]:
    """The splits of ``n`` queries in time order: the first ``train`` share train, then val, the newest test;
    every split with a share holds at least one query when there are enough (taken from the largest)."""
    shares = [getattr(fractions, s) for s in SPLITS]
    edges = [round(sum(shares[: i + 1]) * n) for i in range(len(SPLITS))]
    counts = [edges[0], edges[1] - edges[0], n - edges[1]]
    wanted = [i for i, share in enumerate(shares) if share > 0]
    if n >= len(wanted):
        for i in wanted:
            if counts[i] == 0:
                donor = max(range(len(SPLITS)), key=lambda j: counts[j])
                counts[donor], counts[i] = counts[donor] - 1, 1
    return [s for s, count in zip(SPLITS, counts) for _ in range(count)]


def _seeded_splits(unique: dict[str, PromptRecord], cfg: PromptsConfig) -> dict[str, str]:
    split: dict[str, str] = {}
    for task in sorted({r.task for r in unique.values()}):
        split.update(assign_splits([q for q, r in unique.items() if r.task == task], cfg.split, cfg.seed))
    return split


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
