"""What every profile source but the tournament (the replay and outcomes stages, `jouleroute import`) writes
besides the profile. Here, so that no stage module imports another."""

from __future__ import annotations

import logging

from jouleroute.stages.context import StageContext, write_json
from jouleroute.tournament.summary import summarize_profile, summary_metrics, summary_table

logger = logging.getLogger(__name__)


def finish_profile(ctx: StageContext, stage: str, result: dict, cfg: dict) -> None:
    """What every profile source but the tournament writes besides the profile: its metadata, its summary
    (the tournament's figures, same names) and the stage's MLflow run."""
    import pandas as pd

    profile = pd.read_parquet(ctx.path("profile"))
    summary = summarize_profile(profile)
    write_json(ctx.path("profile_meta"), {**result, "params_hash": ctx.params_hash, "tags": ctx.tags(stage)})
    write_json(ctx.path("tournament_summary"), summary)
    logger.info("%s profile: %d rows\n%s", stage, len(profile), summary_table(summary))
    sources = ",".join(sorted(profile["energy_source"].unique()))
    with ctx.stage_run(stage, energy_source=sources) as run:
        if run is None:
            return
        run.log_metrics(summary_metrics(summary))  # the same names as the tournament's and summary.json
        run.set_tags({"energy_sources": sources})
        run.log_text(summary_table(summary), "profile_summary.md")
        run.log_dict(result, f"{stage}_result.json")
