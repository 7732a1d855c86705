"""Stage `validate`: the Great Expectations suite guards the profile before anything trains on it."""

from __future__ import annotations

import json
import logging

from jouleroute.stages import StageFailed
from jouleroute.stages.context import StageContext
from jouleroute.validation import ValidationError, ValidationResult, run_validate

logger = logging.getLogger(__name__)


def validate_stage(ctx: StageContext) -> ValidationResult:
    tournament = ctx.params.profile_source == "tournament"
    try:
        result = run_validate(
            ctx.path("profile"), ctx.path("validation_dir"), ctx.params.validate_,
            queries_path=ctx.path("queries"),
            # the live pool is known from params; a replayed/imported pool is whatever the import produced
            candidate_ids=ctx.params.candidate_ids if tournament else None,
            power_limit_w=_power_limit_w(ctx) if tournament else None,
        )
    except ValidationError as err:
        raise StageFailed(str(err)) from None
    logger.info(result.summary())
    if not result.success:
        raise StageFailed(result.summary())
    return result


def _power_limit_w(ctx: StageContext) -> float | None:
    """The summed power limit of the metered devices, when the tournament's meter knew it."""
    meta_path = ctx.path("profile_meta")
    if not meta_path.exists():
        return None
    state = json.loads(json.loads(meta_path.read_text()).get("run_state") or "{}")
    limits = [run.get("device", {}).get("power_limit_w") for run in state.get("runs", [])]
    limits = [float(x) for x in limits if x]
    return max(limits) if limits else None
