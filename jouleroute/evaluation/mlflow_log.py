"""Log an evaluation to MLflow: one parent run, nested runs per lambda family and per router.

Uses ``MlflowClient`` with an explicit tracking URI instead of the fluent API,
so logging never depends on (or changes) process-wide MLflow state. Layout::

    evaluate (parent: headline metrics, config params, every output file as artifact)
    |- family <f> (lambda families: AIQ, lambda*, width; the sweep as metrics with step = lambda index)
    |   |- <router at lambda_1> ...   (every metric of both views, per task too)
    |- <router without lambda> ...
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import urlparse

from mlflow import MlflowClient
from mlflow.entities import Metric, Param

_BAD_KEY = re.compile(r"[^A-Za-z0-9_\-. /:]")
_BATCH = 1000  # MLflow's per-request metric limit


def flatten(tree: dict, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a nested dict as {"a.b.c": value}; booleans become 0/1, None and strings are skipped."""
    out: dict[str, float] = {}
    for key, value in tree.items():
        name = f"{prefix}{_BAD_KEY.sub('_', str(key))}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            out[name] = float(value)
    return out


def _experiment_id(client: MlflowClient, tracking_uri: str, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    location = None
    parsed = urlparse(tracking_uri)
    if parsed.scheme == "sqlite":
        # Keep artifacts next to the database (mlruns/mlflow.db -> mlruns/artifacts/...), not in the CWD.
        db = Path(tracking_uri.removeprefix("sqlite:///"))
        location = (db.parent / "artifacts" / name).resolve().as_uri()
    return client.create_experiment(name, artifact_location=location)


def _log_metrics(client: MlflowClient, run_id: str, metrics: dict[str, float], step: int = 0) -> None:
    now = int(time.time() * 1000)
    items = [Metric(k, v, now, step) for k, v in metrics.items()]
    for i in range(0, len(items), _BATCH):
        client.log_batch(run_id, metrics=items[i:i + _BATCH])


def _child(client: MlflowClient, exp: str, parent: str, name: str, tags: dict[str, str]) -> str:
    return client.create_run(exp, run_name=name, tags={**tags, "mlflow.parentRunId": parent}).info.run_id


def _log_router(client: MlflowClient, exp: str, parent: str, name: str, router: dict, tags: dict[str, str]) -> str:
    run_id = _child(client, exp, parent, name, {**tags, "jouleroute.kind": "router", "family": router["family"]})
    params = {"router": name, "family": router["family"], "lam": router["lam"],
              "overhead_energy_source": router["overhead_energy_source"]}
    client.log_batch(run_id, params=[Param(k, str(v)) for k, v in params.items()])
    for view, block in router["views"].items():
        client.set_tag(run_id, f"energy_source.{view}", block.get("energy_source", "n/a"))
    _log_metrics(client, run_id, flatten(router["views"]))
    client.set_terminated(run_id, "FINISHED")
    return run_id


def log_evaluation(result, tracking_uri: str, experiment_name: str, run_tags: dict[str, str]) -> str:
    """Log ``result`` (an EvaluationResult); return the parent run id."""
    client = MlflowClient(tracking_uri=tracking_uri)
    exp = _experiment_id(client, tracking_uri, experiment_name)
    report, tags = result.report, {str(k): str(v) for k, v in run_tags.items()}
    parent = client.create_run(exp, run_name="evaluate", tags={**tags, "jouleroute.stage": "evaluate",
                                                               "energy_source": result.metrics["energy_source"]})
    parent_id = parent.info.run_id
    try:
        cfg = report["config"]
        client.log_batch(parent_id, params=[Param(k, str(v)) for k, v in cfg.items()])
        _log_metrics(client, parent_id, flatten(result.metrics))
        swept = {name for fam in report["families"].values() for name in fam["sweep"]["router"]}
        for fam, info in report["families"].items():
            fam_id = _child(client, exp, parent_id, f"family {fam}", {**tags, "jouleroute.kind": "family"})
            _log_metrics(client, fam_id, flatten({"views": info["views"], "transitions": info["transitions"]}))
            sweep = info["sweep"]
            for step, lam in enumerate(sweep["lam"]):
                _log_metrics(client, fam_id, {"sweep.lam": lam, "sweep.accuracy": sweep["accuracy"][step],
                                              "sweep.j_per_query": sweep["j_per_query"][step],
                                              "sweep.expensive_share": sweep["expensive_share"][step]}, step=step)
            for name in sweep["router"]:
                _log_router(client, exp, fam_id, name, report["routers"][name], tags)
            client.set_terminated(fam_id, "FINISHED")
        for name, router in report["routers"].items():
            if name not in swept:
                _log_router(client, exp, parent_id, name, router, tags)
        for key, path in result.paths.items():
            client.log_artifact(parent_id, str(path), artifact_path="plots" if key.startswith("plot_") else None)
    except Exception:
        client.set_terminated(parent_id, "FAILED")
        raise
    client.set_terminated(parent_id, "FINISHED")
    return parent_id
