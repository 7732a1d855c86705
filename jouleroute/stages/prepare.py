"""Stage `prepare`: build the query table, from the seven benchmarks or from a user's own prompts.

Benchmarks (``prepare.source`` bundled, local or hf): samples `prepare.samples` queries per task (GSM8K,
MATH-500, MMLU, ARC-Challenge, ARC-Easy, HellaSwag, BBH with all 27 sub-tasks) and assigns deterministic
train/val/test splits. Prompts (``prepare.source: prompts``): every prompt of ``prepare.prompts.file`` (a
chat-completions JSONL or a parquet, relative to the repository root) is a query without gold, split by time
or by a seed (``labels.queries.import_prompts``). Either way it writes paths.queries (parquet, QUERY_SCHEMA).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd

from jouleroute.atomic import atomic_write_table
from jouleroute.benchmarks import BenchmarkDataError, run_prepare
from jouleroute.labels.prompts import PromptFileError
from jouleroute.labels.queries import import_prompts
from jouleroute.stages.context import StageContext

logger = logging.getLogger(__name__)


def prepare_stage(ctx: StageContext) -> pd.DataFrame:
    summary = None
    if ctx.params.prepare.source == "prompts":
        queries, summary = _prompt_queries(ctx)
    else:
        queries = _benchmark_queries(ctx)
    counts = queries.groupby(["task", "split"]).size().unstack(fill_value=0)
    logger.info("queries: %d -> %s\n%s", len(queries), ctx.path("queries"), counts.to_string())
    with ctx.stage_run("prepare") as run:  # no energy here: energy_source tag "none"
        if run is not None:
            run.log_metrics({"n_queries": len(queries),
                             **{f"split/{k}": v for k, v in queries["split"].value_counts().items()},
                             **{f"task/{k}": v for k, v in queries["task"].value_counts().items()},
                             **({} if summary is None else _prompt_metrics(summary))})
            run.log_text(counts.to_string(), "queries_by_task_and_split.txt")
            if summary is not None:
                run.log_dict(summary, "prompts_summary.json")
    return queries


def _benchmark_queries(ctx: StageContext) -> pd.DataFrame:
    # data_dir is passed repo-relative because it is recorded in each row's source_file.
    data_dir = Path(os.path.relpath(ctx.path("data_dir"), ctx.root))
    cwd = Path.cwd()
    os.chdir(ctx.root)
    try:
        return run_prepare(ctx.params.prepare, data_dir, ctx.path("queries"))
    finally:
        os.chdir(cwd)


def _prompt_queries(ctx: StageContext) -> tuple[pd.DataFrame, dict]:
    """The query table of ``prepare.prompts.file`` (no gold), written to paths.queries, and the import's summary.
    A file that cannot be read fails in one line naming the file (as the params name it) and the line or row."""
    cfg = ctx.params.prepare.prompts
    try:
        imported = import_prompts(ctx.root / cfg.file, cfg, source_file=cfg.file)
    except PromptFileError as error:
        raise BenchmarkDataError(f"{error} (prepare.prompts.file)") from None
    atomic_write_table(imported.table, ctx.path("queries"))  # a killed prepare never leaves a torn table
    summary = imported.summary
    logger.info("prepare: %d prompts of %s -> %d queries (%d duplicates dropped, %s split)", summary["rows"],
                cfg.file, summary["queries"], summary["duplicates_dropped"], summary["split_rule"])
    return imported.table.to_pandas(), summary


def _prompt_metrics(summary: dict) -> dict[str, float]:
    return {f"prompts/{key}": summary[key] for key in ("rows", "duplicates_dropped", "earlier_turns_dropped")}
