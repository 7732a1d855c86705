"""Stage `prepare`: build the query table from the seven benchmarks.

Samples `prepare.samples` queries per task (GSM8K, MATH-500, MMLU, ARC-Challenge, ARC-Easy,
HellaSwag, BBH with all 27 sub-tasks), assigns deterministic train/val/test splits and writes
paths.queries (parquet). Source: bundled subsets, full local files or Hugging Face datasets.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd

from jouleroute.benchmarks import run_prepare
from jouleroute.stages.context import StageContext

logger = logging.getLogger(__name__)


def prepare_stage(ctx: StageContext) -> pd.DataFrame:
    # data_dir is passed repo-relative because it is recorded in each row's source_file.
    data_dir = Path(os.path.relpath(ctx.path("data_dir"), ctx.root))
    cwd = Path.cwd()
    os.chdir(ctx.root)
    try:
        queries = run_prepare(ctx.params.prepare, data_dir, ctx.path("queries"))
    finally:
        os.chdir(cwd)
    counts = queries.groupby(["task", "split"]).size().unstack(fill_value=0)
    logger.info("queries: %d -> %s\n%s", len(queries), ctx.path("queries"), counts.to_string())
    with ctx.stage_run("prepare") as run:  # no energy here: energy_source tag "none"
        if run is not None:
            run.log_metrics({"n_queries": len(queries),
                             **{f"split/{k}": v for k, v in queries["split"].value_counts().items()},
                             **{f"task/{k}": v for k, v in queries["task"].value_counts().items()}})
            run.log_text(counts.to_string(), "queries_by_task_and_split.txt")
    return queries
