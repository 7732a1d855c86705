"""`jouleroute where`: where the results are, the headline, the latest run of each stage, how to open the UIs."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from jouleroute.commands.ports import ui_port
from jouleroute.evaluation.deployed_section import deployed_summary
from jouleroute.evaluation.headline import headline_rows
from jouleroute.stages import STAGES
from jouleroute.stages.context import StageContext


def where_command(ctx: StageContext, args: argparse.Namespace | None = None) -> None:
    rel = lambda name: ctx.path(name).relative_to(ctx.root) if ctx.path(name).is_relative_to(ctx.root) else ctx.path(name)
    rows = [
        ("queries", rel("queries")),
        ("profile", rel("profile")),
        ("validation report", rel("validation_dir") / "report.html"),
        ("router datasets", rel("router_data_dir")),
        ("SFT router", rel("sft_dir") / "model"),
        ("GRPO router", rel("grpo_dir") / "model"),
        ("evaluation report", rel("evaluate_dir") / "report.md"),
        ("plots", rel("evaluate_dir") / "plots"),
        ("headline metrics", rel("headline")),
        ("MLflow store", rel("mlflow_db")),
    ]
    shown = ctx.params_path.relative_to(ctx.root) if ctx.params_path.is_relative_to(ctx.root) else ctx.params_path
    print(f"\njouleroute results ({shown})")
    if ctx.namespace:
        print(f"  (a params copy: its outputs are under artifacts/{ctx.namespace}/ and mlruns/{ctx.namespace}/ "
              "unless its paths: name others; dvc.yaml's are params.yaml's)")
    for label, path in rows:
        mark = "ok " if (ctx.root / path).exists() else "-- "
        print(f"  {mark}{label:18s} {path}")
    metrics_path = ctx.path("evaluate_dir") / "metrics.json"
    if metrics_path.exists():
        metrics = json.loads(metrics_path.read_text())
        print()
        for line in deployed_summary(metrics.get("deployed")):
            print(line)
        rows = headline_rows(metrics, ctx.params.router.lam)
        print(f"\nheadline (test split; swept routers at their point nearest router.lam={ctx.params.router.lam:g}; "
              f"compact: {rel('headline')}):")
        for line in headline_table(rows):
            print("  " + line)
        for line in overhead_lines(rows.get("lm", {}), rel("embedding_cache").parent / "overhead"):
            print("  " + line)
    report_path = ctx.path("evaluate_dir") / "report.json"
    contest = json.loads(report_path.read_text()).get("val_contest") if report_path.exists() else None
    for line in champion_lines(contest):
        print("  " + line)
    experiment, latest = _print_stage_runs(ctx)  # latest finished
    # straight to the stage runs: MLflow 3's UI otherwise opens an experiment on its GenAI (traces) pages
    runs_page = (f"/#/experiments/{experiment}/runs?searchFilter=tags.run_kind%20%3D%20%27stage%27" if experiment
                 else "  (filter: tags.run_kind = 'stage')")
    (mlflow, mlflow_from), (prefect, prefect_from) = ui_port(ctx.root, "mlflow"), ui_port(ctx.root, "prefect")
    print(f"\nopen the UIs (ports: MLflow {mlflow_from}, Prefect {prefect_from}; PORT=... picks another):")
    print(f"  MLflow:  make ui-mlflow STORE={rel('mlflow_db').parent} PORT={mlflow}  -> http://127.0.0.1:{mlflow}{runs_page}")
    if "evaluate" in latest:  # the runs table shows no metric column until one is picked: this page shows them all
        print("           the latest finished evaluate run's headline on opening (dep.*, best.*, ref.*, aiq.*, the champion's val figures):")
        print(f"           {headline_link(f'http://127.0.0.1:{mlflow}', experiment, [latest['evaluate'].info.run_id])}")
    print(f"  Prefect: make ui-prefect PORT={prefect}  -> http://127.0.0.1:{prefect}   (schedules: jouleroute flow --help)")
    print("  DVC:     dvc metrics show ; jouleroute exp show (experiments: README \"Experiments\") ; dvc plots show (static PNGs)")


def champion_lines(contest: dict | None) -> list[str]:
    """The router chosen on val (what `jouleroute serve` serves), its margin and the margin's paired-bootstrap CI."""
    if not contest:
        return []
    win = contest["winner"]
    lines = [f"champion (chosen on val, {contest['n_val_queries']} queries): {win['name']}, "
             f"mean val utility {win['val_utility']:.4f}"]
    best = contest.get("best_on_utility") or {}
    if contest.get("rule") == "iso_accuracy" and best.get("name") not in (None, win["name"]):
        row = next(c for c in contest["contenders"] if c["name"] == win["name"])
        ci = row.get("utility_gap_ci95")
        interval = f" [{ci[0]:+.4f}, {ci[1]:+.4f}] (95% paired bootstrap)" if ci else ""
        lines.append(f"  gap to the best mean val utility ({best['name']}, {best['val_utility']:.4f}): "
                     f"{row['utility_gap']:+.4f}{interval}")
        lines.append(f"  a tie on val with {', '.join(n for n in contest['tied_on_utility'] if n != win['name'])}: "
                     f"the rule (lower val iso-accuracy energy share) picks {win['name']}")
    elif contest.get("runner_up"):
        ci = contest.get("margin_ci95")
        interval = f" [{ci[0]:+.4f}, {ci[1]:+.4f}] (95% paired bootstrap)" if ci else " (no CI: rerun evaluate)"
        lines.append(f"  margin over {contest['runner_up']}: {contest['margin']:+.4f}{interval}")
        if contest.get("margin_is_tie"):
            rule = ("lower val iso-accuracy energy share" if contest.get("rule") == "iso_accuracy"
                    else "higher mean")
            lines.append(f"  a tie on val: the interval contains 0; the tie rule ({rule}) picks {win['name']}")
    if win.get("iso_share_val") is not None:
        lines.append(f"  val iso-accuracy energy share: {win['iso_share_val']:.1%} of "
                     f"{(contest.get('val_reference') or {}).get('candidate', 'the best single model')}'s energy")
    return lines


def overhead_lines(lm: dict, cache) -> list[str]:
    """Which part of the LM router's J/query (`J` in metrics.json, `dvc exp show`) is its own overhead. When
    none is counted (the headline view is models only: the overhead was metered with another energy_source
    than the pool's, e.g. a modelled replay pool on an estimated CPU, or evaluate.include_overhead is false)
    it says so instead of quoting a 0 as a measurement."""
    if lm.get("j_models_only") is None or lm.get("j_per_query") is None:
        return []
    overhead = lm["j_per_query"] - lm["j_models_only"]
    if overhead <= 0:
        return [f"J/query counts the answers only: no router overhead is included (lm at λ={lm['lam']:g}: "
                f"{lm['j_per_query']:.3g}; the overhead is left out when it is metered with another energy_source "
                "than the pool's, or evaluate.include_overhead is false; report.json has both views)"]
    # `J` in metrics.json (`dvc exp show`) is this J/query: say which part is the router's own
    return [f"J/query includes each router's own overhead; lm at λ={lm['lam']:g}: {lm['j_per_query']:.3g} = "
            f"{lm['j_models_only']:.3g} for the answers + {overhead:.3g} lm overhead",
            f"(the overhead is {lm.get('energy_source', '')}, measured once per machine and router: {cache}/)"]


def headline_table(rows: dict[str, dict]) -> list[str]:
    """Rows of accuracy, J/query, AIQ and λ* (blank where a row has none), with the energy source."""
    f = lambda x: "" if x is None else f"{x:.3g}"
    lines = [f"{'':12s} {'accuracy':>8s} {'J/query':>8s} {'AIQ':>7s} {'λ*':>7s}  energy_source"]
    for name, row in rows.items():
        lines.append(f"{name:12s} {f(row.get('accuracy')):>8s} {f(row.get('j_per_query')):>8s} "
                     f"{f(row.get('aiq')):>7s} {f(row.get('lambda_star')):>7s}  {row.get('energy_source', '')}")
    return lines


def headline_link(base: str, experiment: str, run_ids: list[str]) -> str:
    """MLflow's comparison page of these runs: every metric of each run as a row, visible on opening (the runs
    table only shows the metric columns a user picks, and its URL cannot pick them)."""
    from urllib.parse import urlencode

    return f"{base}/#/compare-runs?" + urlencode({"runs": json.dumps(run_ids), "experiments": json.dumps([experiment])},
                                                 safe=":,")


def _print_stage_runs(ctx: StageContext) -> tuple[str | None, dict]:
    """The latest run of each stage, printed; returns the experiment's id (``None`` without a store) and the latest
    finished run of each stage."""
    if not ctx.tracking_uri or not ctx.path("mlflow_db").exists():
        return None, {}
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=ctx.tracking_uri)
    exp = client.get_experiment_by_name(ctx.params.tracking.experiment)
    if exp is None:
        return None, {}
    runs = client.search_runs([exp.experiment_id], filter_string="tags.run_kind = 'stage'",
                              order_by=["attributes.start_time DESC"], max_results=200)
    latest, finished = {}, {}
    for run in runs:
        latest.setdefault(run.data.tags.get("stage", run.info.run_name), run)
        if run.info.status == "FINISHED":  # the links lead to a run that has its figures, not a failed one
            finished.setdefault(run.data.tags.get("stage", run.info.run_name), run)
    print(f"\nMLflow experiment '{exp.name}': latest run of each stage")
    for stage in [s for s in STAGES if s in latest] + sorted(set(latest) - set(STAGES)):
        run = latest[stage]
        started = datetime.fromtimestamp(run.info.start_time / 1000).strftime("%Y-%m-%d %H:%M")
        source = run.data.tags.get("energy_source", "?")
        print(f"  {stage:12s} {run.info.status:9s} {started}  energy_source={source:10s}"
              f" metrics={len(run.data.metrics):<4d} run {run.info.run_id[:8]}")
    return exp.experiment_id, finished
