"""`jouleroute where`: where the results are, and how to open the UIs."""

from __future__ import annotations

import argparse
import json

from jouleroute.stages.context import StageContext


def where_command(ctx: StageContext, args: argparse.Namespace | None = None) -> None:
    rel = lambda name: ctx.path(name).relative_to(ctx.root) if ctx.path(name).is_relative_to(ctx.root) else ctx.path(name)
    rows = [
        ("queries", rel("queries")),
        ("profile", rel("profile")),
        ("profile metadata", rel("profile_meta")),
        ("validation report", rel("validation_dir") / "report.json"),
        ("validation data docs", rel("validation_dir") / "data_docs" / "index.html"),
        ("router datasets", rel("router_data_dir")),
        ("SFT router", rel("sft_dir") / "model"),
        ("GRPO router", rel("grpo_dir") / "model"),
        ("evaluation metrics", rel("evaluate_dir") / "metrics.json"),
        ("evaluation report", rel("evaluate_dir") / "report.md"),
        ("plots", rel("evaluate_dir") / "plots"),
        ("MLflow store", rel("mlflow_db")),
    ]
    print("\njouleroute results")
    for label, path in rows:
        mark = "ok " if (ctx.root / path).exists() else "-- "
        print(f"  {mark}{label:22s} {path}")
    _print_mlflow_runs(ctx)
    metrics = ctx.path("evaluate_dir") / "metrics.json"
    if metrics.exists():
        print("\nheadline (dvc metrics show):")
        head = json.loads(metrics.read_text())
        print("  " + json.dumps(head.get("headline", head), default=str)[:1500])
    print("\nopen the UIs:")
    print("  MLflow:  make ui-mlflow     -> http://127.0.0.1:5000")
    print("  Prefect: make ui-prefect    -> http://127.0.0.1:4200   (then: jouleroute flow --cron '0 3 * * *')")
    print("  DVC:     .venv/bin/dvc metrics show ; .venv/bin/dvc plots show (static PNGs, offline)")


def _print_mlflow_runs(ctx: StageContext) -> None:
    if not ctx.tracking_uri or not ctx.path("mlflow_db").exists():
        return
    import mlflow

    mlflow.set_tracking_uri(ctx.tracking_uri)
    exp = mlflow.get_experiment_by_name(ctx.params.tracking.experiment)
    if exp is None:
        return
    runs = mlflow.search_runs([exp.experiment_id], filter_string="attributes.status = 'FINISHED'",
                              order_by=["attributes.start_time DESC"], max_results=12)
    print(f"\nMLflow experiment '{exp.name}' (id {exp.experiment_id}), latest runs:")
    for _, run in runs.iterrows():
        print(f"  {run['tags.mlflow.runName']:28s} run_id={run['run_id']}")
