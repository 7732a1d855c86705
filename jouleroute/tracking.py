"""MLflow helpers: one sqlite store under ``mlruns/``, runs tagged with their provenance."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

logger = logging.getLogger(__name__)


def ensure_store(tracking_uri: str) -> str:
    """Create the folder of a ``sqlite:///`` store so MLflow can open it; return the URI."""
    if tracking_uri.startswith("sqlite:///"):
        Path(tracking_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return tracking_uri


def artifact_root(tracking_uri: str) -> str | None:
    """Artifacts live beside the sqlite database (``mlruns/artifacts``), never in the cwd."""
    if tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri.removeprefix("sqlite:///")).parent / "artifacts").resolve().as_uri()
    return None


def ensure_experiment(tracking_uri: str | None, experiment: str) -> None:
    """Create ``experiment`` (artifacts beside the sqlite store) and make it the default for libraries
    that start their own runs (TRL's trainers), through ``MLFLOW_EXPERIMENT_NAME``."""
    if not tracking_uri:
        return
    import mlflow

    mlflow.set_tracking_uri(ensure_store(tracking_uri))
    if mlflow.get_experiment_by_name(experiment) is None:
        mlflow.create_experiment(experiment, artifact_location=artifact_root(tracking_uri))
    os.environ["MLFLOW_EXPERIMENT_NAME"] = experiment


@contextmanager
def mlflow_run(tracking_uri: str | None, experiment: str, run_name: str, tags: dict[str, str] | None = None,
               nested: bool = False) -> Iterator[Any]:
    """Start an MLflow run (or yield ``None`` when tracking is off)."""
    if not tracking_uri:
        yield None
        return
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    mlflow.set_tracking_uri(ensure_store(tracking_uri))
    if mlflow.get_experiment_by_name(experiment) is None:
        mlflow.create_experiment(experiment, artifact_location=artifact_root(tracking_uri))
    mlflow.set_experiment(experiment)
    with mlflow.start_run(run_name=run_name, nested=nested, tags=tags or {}) as run:
        yield run


def flat_params(prefix: str, obj: Any) -> dict[str, str]:
    """Flatten a nested config dict into MLflow params (values truncated to MLflow's limit)."""
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            out.update(flat_params(f"{prefix}.{key}" if prefix else str(key), value))
    elif isinstance(obj, list) and obj and isinstance(obj[0], dict):
        for i, value in enumerate(obj):
            out.update(flat_params(f"{prefix}.{i}", value))
    else:
        out[prefix] = str(obj)[:6000]
    return out
