"""What the router stages share: the held-out check of a trained router and the stage's MLflow run (sft, grpo),
the LM router's resolved base model (sft, budget) and the grpo stage's recorded run (budget, evaluate)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from jouleroute.stages import StageFailed
from jouleroute.stages.context import StageContext
from jouleroute.tracking import StageRun, lambda_step

logger = logging.getLogger(__name__)


def heldout_key(ctx: StageContext) -> str:
    """What a held-out check depends on besides the weights: reused by grpo only when this matches. Not
    ``router.lam``: the check routes at every trained λ (a λ experiment keeps sft's check)."""
    from jouleroute.provenance import stable_hash

    routing = ctx.params.router.model_dump(mode="json", exclude={"lam"})
    return stable_hash(routing) + ":" + ctx.params.energy_policy.norm


def sft_heldout(ctx: StageContext) -> dict:
    """The SFT router's held-out check, from the sft stage's metrics when it was made with the same settings."""
    path = ctx.path("sft_dir") / "metrics.json"
    saved = json.loads(path.read_text()) if path.exists() else {}
    if saved.get("heldout") and saved.get("heldout_key") == heldout_key(ctx):
        return saved["heldout"]
    return heldout_check(ctx, ctx.path("sft_dir") / "model", "sft")


def training_run(ctx: StageContext, stage: str):
    """The stage's one MLflow run (``None`` inside when tracking is off): opened here, handed to the trainer,
    which logs its params and curves into it; the held-out check follows in the same run."""
    spec = json.loads((ctx.path("router_data_dir") / "router_spec.json").read_text())
    check_energy_norm(ctx, spec)
    return ctx.stage_run(stage, energy_source=spec.get("energy_source"))


def check_energy_norm(ctx: StageContext, spec: dict) -> None:
    """The labels (router_data), the GRPO reward and the held-out utility scale joules one way: the
    router's spec records the norm its labels used; params that now say another one need router_data rerun."""
    norm = ctx.params.energy_policy.norm
    if spec.get("energy_norm") != norm:
        raise StageFailed(f"{ctx.path('router_data_dir') / 'router_spec.json'}: labels built with energy norm "
                          f"{spec.get('energy_norm')!r}, but {ctx.params_path.name} has energy_policy.norm: {norm}; "
                          f"run `{ctx.repro_hint('router_data')}` first")


def log_training_metrics(run: StageRun | None, metrics: dict) -> None:
    """Held-out accuracy and the chosen candidates' mean joules (the same names as in the stage's metrics.json)."""
    if run is None:
        return
    for key in ("heldout", "heldout_sft"):
        check = metrics.get(key) or {}
        run.log_metrics({f"{key}.overall.{k}": v for k, v in check.get("overall", {}).items()})
        for lam, row in check.get("by_lambda", {}).items():  # charted against λ
            run.log_metrics({f"{key}.by_lambda.{k}": v for k, v in row.items()}, step=lambda_step(float(lam)))
    run.log_metrics({k: v for k, v in metrics.items() if not isinstance(v, dict)})
    run.log_metrics({f"sft_vs_grpo.{k}": v for k, v in metrics.get("sft_vs_grpo", {}).items()})


def heldout_check(ctx: StageContext, model_dir: Path, name: str) -> dict:
    """A trained router vs trivial policies (majority label, best constant, random), on held-out (val) queries.

    Val queries never enter training; the test split is left to `evaluate`.
    """
    from jouleroute.energy import make_meter
    from jouleroute.evaluation.label_eval import label_accuracy, load_rows
    from jouleroute.routing.lm.router import LMRouter

    val_path = ctx.path("router_data_dir") / "val.jsonl"
    rows = load_rows(val_path) if val_path.exists() else []
    if not rows:
        logger.warning("no held-out val rows in %s: held-out utility not measured", val_path)
        return {}
    router = LMRouter(model_dir, meter=make_meter(ctx.params.energy), cfg=ctx.params.router)
    train_rows = load_rows(ctx.path("router_data_dir") / "train.jsonl")
    _score_with_progress(ctx, router, rows, f"{name} held-out check")
    result = label_accuracy(router, rows, energy_norm=ctx.params.energy_policy.norm, train_rows=train_rows)
    overall = result["overall"]
    by_lambda = result["by_lambda"].values()
    n = sum(row["n"] for row in by_lambda)  # the chosen candidates' mean joules over every (query, λ) row
    overall["chosen_mean_energy_j"] = sum(row["chosen_mean_energy_j"] * row["n"] for row in by_lambda) / n
    logger.info("%s held-out: utility %.3f vs best constant %.3f, majority %.3f, random %.3f; oracle %.3f "
                "(beats trivial: %s; label accuracy %.3f vs majority %.3f)", name, overall["router_utility"],
                overall["best_constant_utility"], overall["majority_utility"], overall["random_utility"],
                overall["oracle_utility"], overall["beats_trivial"], overall["label_accuracy"],
                overall["majority_accuracy"])
    return result


def _score_with_progress(ctx: StageContext, router, rows: list[dict], label: str) -> None:
    """Score the val queries once with a progress bar; label_accuracy's per-λ routing reuses the scores
    (LMRouter memoizes the last query batch, and every λ group lists the same queries in the same order)."""
    frame = pd.DataFrame(rows)
    first = frame[frame["lam"] == frame["lam"].min()].reset_index(drop=True)
    router.score(first, progress=ctx.progress(len(first), label))


def router_path(ctx: StageContext) -> Path:
    return ctx.path("grpo_dir") / "model"


def base_model_dir(ctx: StageContext) -> str:
    """`sft.base_model`: a key of `models` (converted by the `models` stage), a local folder or a hub id."""
    name = ctx.params.sft.base_model
    if name in ctx.params.models:
        spec = ctx.params.models[name]
        if spec.source == "pypi-gguf":
            return str(ctx.path("models_dir") / name)
        return spec.path or spec.hub_id or name
    return str(ctx.root / name) if (ctx.root / name).exists() else name


RUN_RECORD = "mlflow_run.json"  # in grpo_dir: the grpo stage's MLflow run id and registered router version


def grpo_run(ctx: StageContext) -> dict:
    """The grpo stage's MLflow run, by the id it recorded in its outputs (``grpo_dir/mlflow_run.json``):
    budget writes into that run, evaluate tags its router version. ``{}`` when it recorded none (tracking off)."""
    import json

    path = ctx.path("grpo_dir") / RUN_RECORD
    return json.loads(path.read_text()) if path.is_file() else {}
