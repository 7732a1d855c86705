"""MLflow for the router stages: one named run per stage, live metrics, the final router.

A stage opens run ``sft`` or ``grpo`` (nested under the caller's active run, e.g. the
pipeline's parent run, when there is one), logs its params, every Trainer log line as
metrics at the trainer's global step (loss, reward and each ``rewards/<name>/mean``,
``kl``, ``choices/<candidate>``), and finally the router folder as a pyfunc model.
With ``tracking_uri=None`` nothing is logged and nothing from MLflow is imported.
"""

from __future__ import annotations

import logging
import math
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from transformers import TrainerCallback

log = logging.getLogger(__name__)

DEFAULT_EXPERIMENT = "jouleroute"


@contextmanager
def stage_run(tracking_uri: str | None, stage: str, params: dict[str, Any], tags: dict[str, str]) -> Iterator[Any]:
    """Yield the MLflow module inside a run named ``stage`` (or ``None`` when tracking is off)."""
    if tracking_uri is None:
        yield None
        return
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    parent = mlflow.active_run()
    if parent is None and not os.environ.get("MLFLOW_EXPERIMENT_NAME") and not os.environ.get("MLFLOW_EXPERIMENT_ID"):
        mlflow.set_experiment(DEFAULT_EXPERIMENT)
    with mlflow.start_run(run_name=stage, nested=parent is not None,
                          tags={"stage": stage, "component": "router", **tags}):
        mlflow.log_params({k: _param_text(v) for k, v in params.items()})
        yield mlflow


def _param_text(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 6000 else text[:5997] + "..."  # MLflow caps param values


class MlflowMetricsCallback(TrainerCallback):
    """Logs every numeric Trainer log entry to the active MLflow run at ``state.global_step``."""

    def __init__(self, mlflow_module: Any):
        self.mlflow = mlflow_module

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or self.mlflow is None:
            return
        metrics = {_metric_name(k): float(v) for k, v in logs.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}
        if metrics:
            self.mlflow.log_metrics(metrics, step=state.global_step)


def _metric_name(key: str) -> str:
    # MLflow accepts / . - _ and spaces; anything else (e.g. ':' in a candidate id) becomes '_'
    return "".join(ch if ch.isalnum() or ch in "/._- " else "_" for ch in key)


def log_router_model(mlflow_module: Any, model_dir: Path, registered_model_name: str | None) -> str | None:
    """Log the saved router folder as an MLflow pyfunc model (and register it when named).

    The pyfunc (``routing.lm_pyfunc``) wraps LMRouter over the folder, so ``models:/...``
    loads a working router. mlflow.transformers cannot log a checkpoint folder with
    transformers 5.x (it fails inside its flavor config), hence pyfunc + artifacts.
    """
    if mlflow_module is None:
        return None
    from jouleroute.routing.lm.pyfunc import LMRouterPyfunc

    info = mlflow_module.pyfunc.log_model(
        name="router", python_model=LMRouterPyfunc(), artifacts={"router": str(model_dir)},
        pip_requirements=["jouleroute"], registered_model_name=registered_model_name,
    )
    return info.model_uri


def log_stage_end(mlflow_module: Any, stage: str, metrics: dict[str, Any], model_dir: Path, cfg: Any) -> None:
    """Final metrics, the metrics dict as JSON, and (``cfg.log_model``) the router itself."""
    if mlflow_module is None:
        return
    mlflow_module.log_metrics({"train_s": metrics["train_s"], "final_train_loss": metrics["train_loss"]})
    mlflow_module.log_dict(metrics, f"{stage}_metrics.json")
    if cfg.log_model:
        metrics["model_uri"] = log_router_model(mlflow_module, model_dir, cfg.registered_model_name)
