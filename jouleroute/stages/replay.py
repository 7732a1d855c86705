"""Stage `replay`: build queries + profile from RouterBench outcomes (modelled energy).

Real correctness from RouterBench; energy and latency modelled from ML.ENERGY measurements
(energy_source=modelled). The replay study's first stage (studies/replay).
"""

from __future__ import annotations

import logging

from jouleroute.replay import run_replay
from jouleroute.stages import StageFailed
from jouleroute.stages.context import StageContext
from jouleroute.stages.profile_record import finish_profile

logger = logging.getLogger(__name__)


def replay_stage(ctx: StageContext) -> dict:
    if ctx.params.replay is None:
        raise StageFailed(f"{ctx.params_path.name} has no `replay:` section (see studies/replay/params.yaml)")
    result = run_replay(ctx.params.replay, ctx.root, ctx.path("queries"), ctx.path("profile"))
    finish_profile(ctx, "replay", result, ctx.params.replay.model_dump(mode="json"))
    return result
