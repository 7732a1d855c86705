"""`jouleroute flow`: run the pipeline once through Prefect, or serve it on a cron schedule.

This module is the only place the CLI touches Prefect; the library stays free of it.
"""

from __future__ import annotations

import argparse

from jouleroute.stages.context import StageContext


def flow_command(ctx: StageContext, args: argparse.Namespace) -> None:
    from jouleroute_flows.pipeline import pipeline

    replay = ctx.params.profile_source != "tournament"
    if args.cron:
        # Registers a deployment with a schedule; needs PREFECT_API_URL pointing at `prefect server start`.
        pipeline.serve(name="jouleroute-scheduled", cron=args.cron,
                       parameters={"params_path": str(ctx.params_path), "root": str(ctx.root),
                                   "stages": args.stages, "via_dvc": True, "replay": replay})
        return
    pipeline(params_path=str(ctx.params_path), root=str(ctx.root), stages=args.stages, via_dvc=True, replay=replay)
