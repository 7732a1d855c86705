"""Stage `validate`: check the labelled profile with Great Expectations.

Schema, completeness (every labelled query x candidate once), ranges, correctness in {0,1} (in [0, 1] for an imported
profile or feedback scores), energy_source labels, label_source labels (one source unless labels.allow_mixed) and
the labels' coverage (at least labels.min_coverage of the profiled queries). Writes report.json and data docs to
paths.validation_dir; exits 1 with a readable summary when an expectation fails, before anything trains on it.
"""

from __future__ import annotations

import json
import logging

import pandas as pd

from jouleroute.stages import StageFailed
from jouleroute.stages.context import StageContext
from jouleroute.tracking import energy_label
from jouleroute.validation import ValidationError, ValidationResult, run_validate
from jouleroute.validation.config import LabelCheck

logger = logging.getLogger(__name__)


def validate_stage(ctx: StageContext) -> ValidationResult:
    tournament = ctx.params.profile_source == "tournament"
    labels = json.loads((ctx.path("labels_dir") / "summary.json").read_text())
    try:
        result = run_validate(
            ctx.path("labelled_profile"), ctx.path("validation_dir"), ctx.params.validate_,
            queries_path=ctx.path("queries"), expected_query_ids=_labelled_query_ids(ctx, labels),
            # the live pool is known from params; a replayed/imported pool is whatever the import produced
            candidate_ids=ctx.params.candidate_ids if tournament else None,
            power_limit_w=_power_limit_w(ctx) if tournament else None,
            allow_mixed_sources=ctx.params.energy_policy.allow_mixed_sources,
            # imported outcomes may carry an expected correctness in [0, 1], and so may a user's feedback scores
            fractional_correct=not tournament or ctx.params.labels.feedback is not None,
            labels=LabelCheck(ctx.params.labels.allow_mixed, labels["coverage"], ctx.params.labels.min_coverage),
        )
    except ValidationError as err:
        _log_to_mlflow(ctx, err.result)
        raise StageFailed(str(err)) from None
    logger.info(result.summary())
    _log_to_mlflow(ctx, result)
    if not result.success:
        raise StageFailed(result.summary())
    return result


def _log_to_mlflow(ctx: StageContext, result: ValidationResult) -> None:
    """Expectations passed/failed (per check family too), the report files, the profile's energy_source."""
    profile = pd.read_parquet(result.profile_path)
    sources = list(map(str, profile["energy_source"].dropna().unique())) if "energy_source" in profile else []
    with ctx.stage_run("validate", energy_source=energy_label(sources)) as run:
        if run is None:
            return
        passed = sum(c["success"] for c in result.checks)
        metrics = {"expectations_passed": passed, "expectations_failed": len(result.checks) - passed,
                   "expectations_total": result.n_expectations, "success": result.success, "rows": result.n_rows}
        for check in sorted({c["check"] for c in result.checks}):
            metrics[f"failed.{check}"] = sum(not c["success"] for c in result.checks if c["check"] == check)
        run.log_metrics(metrics)
        for path in (result.report_path, result.html_path):
            if path.exists():
                run.log_artifact(path)


def _labelled_query_ids(ctx: StageContext, labels: dict) -> list[str] | None:
    """The queries the labelled profile must hold: those the tournament profiled (all of the table, or when it ran
    only some, grpo.reward_source live, SFT's share of the train queries and every val and test query), less the
    ones the labels left out (stage labels' summary.json); None: every query of the table."""
    meta_path = ctx.path("profile_meta")
    profiled = json.loads(meta_path.read_text()).get("profiled_query_ids") if meta_path.exists() else None
    left_out = set(labels.get("unlabelled_query_ids") or ())
    if not left_out:
        return profiled
    if profiled is None:
        profiled = pd.read_parquet(ctx.path("queries"), columns=["query_id"])["query_id"].tolist()
    return [q for q in profiled if q not in left_out]


def _power_limit_w(ctx: StageContext) -> float | None:
    """The bound on avg_power_w that the tournament's meters recorded (run.json's run_state), if they all did."""
    meta_path = ctx.path("profile_meta")
    if not meta_path.exists():
        return None
    return power_limit_from_run_state(json.loads(json.loads(meta_path.read_text()).get("run_state") or "{}"))


def power_limit_from_run_state(state: dict) -> float | None:
    """The largest power limit of the devices that metered the profile; None unless every one of them states one.

    Each run records its meters per worker (``runs[].workers[<worker>].device``, a meter's ``device_info()``; a run
    with one worker also at ``runs[].device``). Every row was metered on one of those devices, so the largest limit
    bounds every row. A device with no ``power_limit_w`` (the estimate, an exporter, modelled energy, or a state
    recorded before the key, whose ``gpu_power_limits_w`` may be another GPU's) leaves its rows, so the profile,
    unbounded.
    """
    devices = []
    for run in state.get("runs", []):
        if run.get("workers"):
            devices += [worker.get("device") or {} for worker in run["workers"].values()]
        elif "device" in run:
            devices.append(run["device"])
    limits = [device.get("power_limit_w") for device in devices]
    if not limits or None in limits:
        return None
    return max(float(limit) for limit in limits)
