"""Log an evaluation to MLflow: one parent run, nested runs per lambda family and per router.

The parent is the evaluate stage's one run, opened by the stage (``StageContext.stage_run``) and handed
in; ``MlflowClient`` with an explicit tracking URI writes it instead of the fluent API, so logging never
depends on (or changes) process-wide MLflow state. Layout::

    evaluate (parent, run_kind=stage: the headline only (``dvc metrics show``'s keys, each family's AIQ and
    |          lambda*, the champion's val figures), config params, every output file as artifact (metrics.json
    |          holds every router's figures), the LM family's phase-transition plot and the champion family's)
    |- family <f> (run_kind=family: AIQ, lambda*, width; the sweep as metrics charted against lambda,
    |   |          step = round(lambda x 1000), plus sweep.json as a table; its phase-transition plot)
    |   |- <router at lambda_1> ...   (run_kind=router: every metric of both views, per task too)
    |- <router without lambda> ...

Metric names are the flattened keys of metrics.json / report.json ("routers.knn:0.05.aiq"), so a
name means the same thing in the file, in MLflow and in the reports.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from mlflow import MlflowClient
from mlflow.entities import Metric, Param

from jouleroute.evaluation.plots import plot_lambda_sweep
from jouleroute.tracking import RUN_KIND, lambda_step, mlflow_key

log = logging.getLogger(__name__)

_BATCH = 1000  # MLflow's per-request metric limit


def flatten(tree: dict, prefix: str = "") -> dict[str, float]:
    """Numeric leaves of a nested dict as {"a.b.c": value}; booleans become 0/1, None and strings are skipped."""
    out: dict[str, float] = {}
    for key, value in tree.items():
        name = f"{prefix}{mlflow_key(key)}"
        if name != f"{prefix}{key}":
            log.warning("MLflow cannot store the key %r: logged as %r", f"{prefix}{key}", name)
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        elif isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            out[name] = float(value)
    return out


def _log_metrics(client: MlflowClient, run_id: str, metrics: dict[str, float], step: int = 0) -> None:
    now = int(time.time() * 1000)
    items = [Metric(k, v, now, step) for k, v in metrics.items()]
    for i in range(0, len(items), _BATCH):
        client.log_batch(run_id, metrics=items[i:i + _BATCH])


def _child(client: MlflowClient, exp: str, parent: str, name: str, tags: dict[str, str]) -> str:
    return client.create_run(exp, run_name=name, tags={**tags, "mlflow.parentRunId": parent}).info.run_id


def _log_router(client: MlflowClient, exp: str, parent: str, name: str, router: dict, tags: dict[str, str]) -> str:
    run_id = _child(client, exp, parent, name, {**tags, RUN_KIND: "router", "family": router["family"]})
    params = {"router": name, "family": router["family"], "lam": router["lam"],
              "overhead_energy_source": router["overhead_energy_source"]}
    client.log_batch(run_id, params=[Param(k, str(v)) for k, v in params.items()])
    for view, block in router["views"].items():
        client.set_tag(run_id, f"energy_source.{view}", block.get("energy_source", "n/a"))
    _log_metrics(client, run_id, flatten(router["views"]))
    client.set_terminated(run_id, "FINISHED")
    return run_id


def _log_phase_plot(client: MlflowClient, run_id: str, family: str, info: dict, energy_label: str,
                    name: str = "phase_transition.png") -> None:
    """The family's phase transition: accuracy, energy and expensive share against lambda, lambda* marked."""
    sweep = {family: {**info["sweep"], "lambda_star": info.get("lambda_star")}}
    with tempfile.TemporaryDirectory() as tmp:
        path = plot_lambda_sweep(sweep, energy_label, Path(tmp) / name)
        client.log_artifact(run_id, str(path), artifact_path="plots")


def parent_metrics(metrics: dict, val_contest: dict | None) -> dict[str, float]:
    """The evaluate run's own few metrics, so the MLflow runs table shows them (the stage also logs the compact
    headline, `dvc metrics show`'s keys): per family its AIQ, AIQ lift and lambda*, the zero-router AIQ, the
    oracle, and the champion's val utility and margin. Every router's figures are in its child run and in the
    metrics.json artifact (the same names)."""
    out = {"aiq_zero_router": metrics.get("aiq_zero_router")}
    for fam, block in metrics.get("families", {}).items():
        out |= {f"families.{fam}.{k}": block.get(k) for k in ("aiq", "aiq_lift", "lambda_star")}
    out |= {f"oracle.{k}": v for k, v in metrics.get("oracle", {}).items()}
    if val_contest:
        out |= {"champion.val_utility": val_contest["winner"]["val_utility"],
                "champion.margin": val_contest.get("margin")}
    return {k: v for k, v in flatten(out).items()}


def log_evaluation(result, run) -> str:
    """Log ``result`` (an EvaluationResult) into ``run``, the evaluate stage's one run (``tracking.StageRun``,
    opened and closed by the stage), with a child run per family and per swept router; return its id."""
    client, parent_id = run.client, run.run_id
    exp = client.get_run(parent_id).info.experiment_id
    report = result.report
    inherited = client.get_run(parent_id).data.tags  # the stage's provenance (git sha, params hash), not its kind
    tags = {k: v for k, v in inherited.items() if not k.startswith("mlflow.") and k not in (RUN_KIND, "energy_source")}
    client.set_tag(parent_id, "energy_source", result.metrics["energy_source"])
    view = report["headline_view"]  # params: the stage's dvc.yaml params only, logged when its run opened
    _log_metrics(client, parent_id, parent_metrics(result.metrics, report.get("val_contest")))
    swept = {name for fam in report["families"].values() for name in fam["sweep"]["router"]}
    for fam, info in report["families"].items():
        fam_id = _child(client, exp, parent_id, f"family {fam}", {**tags, RUN_KIND: "family", "family": fam,
                                                                  "energy_source": report["views"][view]
                                                                  .get("energy_source", "none")})
        _log_metrics(client, fam_id, flatten({"views": info["views"], "transitions": info["transitions"],
                                              "lambda_star": info.get("lambda_star")}))
        sweep = info["sweep"]
        for i, lam in enumerate(sweep["lam"]):
            _log_metrics(client, fam_id, {"sweep.lam": lam, "sweep.accuracy": sweep["accuracy"][i],
                                          "sweep.j_per_query": sweep["j_per_query"][i],
                                          "sweep.expensive_share": sweep["expensive_share"][i]},
                         step=lambda_step(lam))
        client.log_table(fam_id, data={k: sweep[k] for k in ("lam", "router", "accuracy", "j_per_query",
                                                             "expensive_share")}, artifact_file="sweep.json")
        _log_phase_plot(client, fam_id, fam, info, report["views"][view].get("energy_source", "none"))
        champion = (report.get("val_contest") or {}).get("winner", {}).get("family")
        if fam == ("lm" if "lm" in report["families"] else next(iter(report["families"]))):
            # the deployed (LM) family's, at the evaluate run's top level: no click into a child run
            _log_phase_plot(client, parent_id, fam, info, report["views"][view].get("energy_source", "none"))
        if fam == champion:
            _log_phase_plot(client, parent_id, fam, info, report["views"][view].get("energy_source", "none"),
                            name=f"champion_{fam}_phase_transition.png")
        for name in sweep["router"]:
            _log_router(client, exp, fam_id, name, report["routers"][name], tags)
        client.set_terminated(fam_id, "FINISHED")
    for name, router in report["routers"].items():
        if name not in swept:
            _log_router(client, exp, parent_id, name, router, tags)
    for key, path in result.paths.items():
        client.log_artifact(parent_id, str(path), artifact_path="plots" if key.startswith("plot_") else None)
    return parent_id
