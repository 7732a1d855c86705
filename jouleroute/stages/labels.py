"""Stage `labels`: mark each answer of the profile correct or not, from gold, a reference model, a vote or feedback.

Reads the tournament's profile (``paths.profile``: graded against gold where the queries carry it) and writes the
profile every later stage trains on (``paths.labelled_profile``): each row's ``correct`` from ``labels.source``
with its ``label_source`` (``gold``, ``reference:<candidate>``, ``vote``, ``feedback``). A query the labels cannot
mark (no comparable answer, a tied vote, a silent reference) is left out and counted. Where gold exists and the
labels are not gold, it also measures them against gold (precision and recall of "correct", agreement, per task,
with CIs) into ``quality.json``: what having no gold costs.
"""

from __future__ import annotations

import logging

import pandas as pd

from jouleroute.atomic import atomic_write_table
from jouleroute.labels.labelled import label_profile
from jouleroute.stages.context import StageContext, write_json

logger = logging.getLogger(__name__)


def labels_stage(ctx: StageContext) -> dict:
    graded = pd.read_parquet(ctx.path("profile"))
    result = label_profile(graded, ctx.params.labels, ctx.root)
    labels_dir = ctx.path("labels_dir")
    atomic_write_table(result.table, ctx.path("labelled_profile"))
    write_json(labels_dir / "summary.json", result.summary)
    write_json(labels_dir / "quality.json", result.quality)
    logger.info("labels (%s): %d of %d queries labelled -> %s", result.summary["source"],
                result.summary["labelled_queries"], result.summary["queries"], ctx.path("labelled_profile"))
    sources = ",".join(sorted(map(str, graded["energy_source"].dropna().unique())))  # the labels move no joule
    with ctx.stage_run("labels", energy_source=sources or None) as run:
        if run is not None:
            run.log_metrics(result.metrics())
            run.set_tags({"label_source": result.summary["source_label"]})
            run.log_dict(result.summary, "summary.json")
            run.log_dict(result.quality, "quality.json")
    return result.summary
