"""MLflow for the router trainers: they log into the run their stage opened, never a run of their own.

The `sft` or `grpo` stage opens its one run (``StageContext.stage_run``) and hands it to
``run_sft``/``run_grpo``, which log the facts of their run as tags (device, query counts, where a
resumed run started: the params it depends on are the stage's, logged from dvc.yaml when the run opened), every
Trainer log line as metrics at the
trainer's global step (loss, reward and each ``rewards/<name>/mean``, ``kl``,
``choices/<candidate>``), and finally, when asked, the router folder as a pyfunc model.
TRL's own reporting is off (``report_to="none"``): its MLflow callback would open a run of its own.
With ``run=None`` (tracking off) nothing is logged and nothing from MLflow is imported.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from jouleroute.tracking import StageRun

log = logging.getLogger(__name__)


def log_stage_start(run: StageRun | None, facts: dict[str, Any]) -> None:
    """What this training run found (device, query counts, the checkpoint it resumed from), as tags of the
    stage's run: its params are the stage's dvc.yaml params only, logged when the run opened."""
    if run is None:
        return
    run.set_tags({"component": "router", **{k: _param_text(v) for k, v in facts.items()}})


def _param_text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."  # MLflow caps param values


class MlflowMetricsCallback(TrainerCallback):
    """Logs every numeric Trainer log entry to the stage's run at ``state.global_step``."""

    def __init__(self, run: StageRun | None):
        self.run = run

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or self.run is None:
            return
        metrics = {_metric_name(k): float(v) for k, v in logs.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}
        if metrics:
            self.run.log_metrics(metrics, step=state.global_step)


def _metric_name(key: str) -> str:
    # MLflow accepts / . - _ and spaces; anything else (e.g. ':' in a candidate id) becomes '_'
    return "".join(ch if ch.isalnum() or ch in "/._- " else "_" for ch in key)


def log_router_model(run: StageRun | None, model_dir: Path, registered_model_name: str | None) -> str | None:
    """Log the saved router folder as an MLflow pyfunc model (and register it when named).

    The pyfunc (``routing.lm_pyfunc``) wraps LMRouter over the folder, so ``models:/...``
    loads a working router. mlflow.transformers cannot log a checkpoint folder with
    transformers 5.x (it fails inside its flavor config), hence pyfunc + artifacts.
    """
    if run is None:
        return None
    from jouleroute.routing.lm.pyfunc import LMRouterPyfunc

    with run.active() as mlflow:  # pyfunc.log_model writes to the active run only
        info = mlflow.pyfunc.log_model(
            name="router", python_model=LMRouterPyfunc(), artifacts={"router": str(model_dir)},
            pip_requirements=["jouleroute"], registered_model_name=registered_model_name,
        )
    return info.model_uri


def log_stage_end(run: StageRun | None, stage: str, metrics: dict[str, Any], model_dir: Path, cfg: Any) -> None:
    """Final metrics, the metrics dict as JSON, and (``cfg.log_model``) the router itself."""
    if run is None:
        return
    run.log_metrics({"train_s": metrics["train_s"], "final_train_loss": metrics["train_loss"]})
    run.log_dict(metrics, f"{stage}_metrics.json")
    if cfg.log_model:
        metrics["model_uri"] = log_router_model(run, model_dir, cfg.registered_model_name)
