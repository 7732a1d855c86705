"""Write an evaluation to disk: metrics.json, report.json, report.md, sweep.csv and plots/*.png.

metrics.json keeps the headline numbers flat enough for ``dvc metrics show``;
report.json keeps everything; report.md is for people, and states the
energy_source next to every energy column.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from jouleroute.evaluation.config import EvaluateConfig
from jouleroute.evaluation.formatting import fmt as _f
from jouleroute.evaluation.cascade_section import cascade_metrics
from jouleroute.evaluation.cascades import write_chain_files
from jouleroute.evaluation.deployed_section import deployed_metrics
from jouleroute.evaluation.results_page import FRONTIER_PLOT, results_lines
from jouleroute.evaluation.val_contest_section import query_energy_lines, val_contest_lines
from jouleroute.evaluation.plots import (plot_accuracy_vs_energy, plot_lambda_star_by_task, plot_lambda_sweep,
                                        plot_routing_mix, safe_name)


def clean(value):
    """JSON-safe copy: numpy scalars to Python, NaN/inf to None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def headline_metrics(report: dict) -> dict:
    view = report["headline_view"]
    other = "models_only"

    def pick(entry: dict, *keys: str) -> dict:
        return {k: entry["views"][view][k] for k in keys}

    routers = {}
    for name, r in report["routers"].items():
        routers[name] = pick(r, "accuracy", "j_per_query", "aiq", "pgr", "savings_captured_pct", "on_frontier",
                             "energy_source")
        routers[name]["j_per_query_models_only"] = r["views"][other]["j_per_query"]
    return {
        "split": report["split"],
        "n_queries": report["n_queries"],
        "headline_view": view,
        "energy_source": report["views"][view]["energy_source"],
        "aiq_zero_router": report["views"][view]["aiq_zero_router"],
        "oracle": pick(report["oracle"], "accuracy", "j_per_query"),
        "singles": {c: pick(s, "accuracy", "j_per_query") for c, s in report["singles"].items()},
        "routers": routers,
        "families": {
            f: {"aiq": v["views"][view]["aiq"], "aiq_lift": v["views"][view]["aiq_lift"],
                "lambda_star": v.get("lambda_star"), "lambda_star_per_task": v.get("lambda_star_per_task", {}),
                "transition_width_log10": v.get("transitions", {}).get("combined", {}).get("width_log10")}
            for f, v in report["families"].items()
        },
        **({"aiq_difference": report["aiq_difference"]} if "aiq_difference" in report else {}),
        **({"iso_accuracy": iso_accuracy_metrics(report["iso_accuracy"])} if "iso_accuracy" in report else {}),
        **({"deployed": deployed_metrics(report["deployed"], report["views"][view]["energy_source"])}
           if report.get("deployed") else {}),
        **({"val_contest": report["val_contest"]} if "val_contest" in report else {}),
        **({"cascade": cascade_metrics(report["cascade"])} if report.get("cascade") else {}),
        **({"labels": report["labels"]} if report.get("labels") else {}),
    }


def iso_accuracy_metrics(block: dict) -> dict:
    """metrics.json's compact copy: per policy (and the champion) the share, its CI and the oracle share."""
    keep = ("reached", "point", "accuracy", "j_per_query", "energy_share", "energy_share_ci",
            "oracle_savings_captured_pct", "oracle_savings_captured_pct_ci")
    out = {k: block[k] for k in ("tolerance", "best_single", "best_accuracy", "best_j_per_query",
                                 "oracle_energy_share")}
    def row_of(row: dict) -> dict:  # the intervals also as scalars: MLflow logs numbers, not lists
        bounds = {f"{k}_{side}": row[k][i] for k in ("energy_share_ci", "oracle_savings_captured_pct_ci") if row[k]
                  for i, side in enumerate(("low", "high"))}
        return {k: row[k] for k in keep} | bounds

    out["policies"] = {name: row_of(row) for name, row in block["policies"].items()}
    if "champion" in block:
        out["champion"] = {"family": block["champion"]["family"], "name": block["champion"]["name"]} | \
            row_of(block["champion"])
    return out


def markdown(report: dict, with_plot: bool = False) -> str:
    view = report["headline_view"]
    src = report["views"][view]["energy_source"]
    prov = report.get("provenance", {})
    lines = [f"# Routing evaluation ({report['split']} split, {report['n_queries']} queries)", "",
             f"Energy source: **{src}** (energy column `{report['energy_column']}`). Headline view: **{view}** "
             "(router overhead " + ("included" if view == "with_overhead" else "excluded") + ").",
             "Provenance: " + (", ".join(f"{k}={v}" for k, v in sorted(prov.items())) or "none given"), ""]
    if src.startswith("mixed:"):
        lines += [f"> **Warning**: energy figures mix sources ({src}); comparisons are indicative only.", ""]
    lines += results_lines(report, f"plots/{FRONTIER_PLOT}" if with_plot else None) + [""]
    if report["families"]:
        lines += ["", "## Lambda families", "", f"Expensive candidates: {report['expensive_candidates']}.", "",
                  "| family | AIQ | AIQ lift | lambda* | transition width (log10 lambda) | resolved |",
                  "|---|---|---|---|---|---|"]
        for fam, f in report["families"].items():
            t, v = f["transitions"]["combined"], f["views"][view]
            lines.append(f"| {fam} | {_f(v['aiq'])} | {_f(v['aiq_lift'])} | {_f(f['lambda_star'])} "
                         f"| {_f(t['width_log10'])} | {_f(t['resolved'])} |")
        lines += ["", "λ* per task (the same detector on each task's accuracy and expensive share; n/a: no "
                      "transition on the grid; plots/lambda_star_by_task.png):", "",
                  "| family | " + " | ".join(report["tasks"]) + " |", "|---|" + "---|" * len(report["tasks"])]
        for fam, f in report["families"].items():
            per = f.get("lambda_star_per_task", {})
            lines.append(f"| {fam} | " + " | ".join(_f(per.get(t)) for t in report["tasks"]) + " |")
    lines += comparison_lines(report.get("aiq_difference"))
    lines += iso_accuracy_lines(report.get("iso_accuracy"))
    lines += val_contest_lines(report.get("val_contest"))
    lines += query_energy_lines((report.get("val_contest") or {}).get("query_energy"))
    lines += ["", "## Accuracy per task", "", "| policy | " + " | ".join(report["tasks"]) + " |",
              "|---|" + "---|" * len(report["tasks"])]
    for name, e in list(report["singles"].items()) + [("oracle", report["oracle"])] + list(report["routers"].items()):
        per = e["views"][view]["per_task"]
        lines.append(f"| {name} | " + " | ".join(_f(per[t]["accuracy"]) for t in report["tasks"]) + " |")
    lines += ["", "Definitions: docs/metrics.md. Plots: plots/*.png.", ""]
    return "\n".join(lines)


def comparison_lines(block: dict | None) -> list[str]:
    """The LM router against each baseline family: energy-AIQ difference, paired-bootstrap CI, verdict.
    Shared by report.md and the generated study and embedded-default pages."""
    if not block:
        return []
    ref = block["reference"]
    families = block["families"]
    ref_aiq = next(iter(families.values()))["reference_aiq"] if families else None
    lines = ["", f"## {ref.upper()} router vs each baseline (energy-AIQ, paired bootstrap)", "",
             f"{block['n_queries']} test queries resampled with replacement, {block['samples']} resamples (seed "
             f"{block['seed']}), the same resamples for every family; {block['confidence']:.0%} percentile "
             f"interval of AIQ({ref}) − AIQ(family), `{block.get('view', '?')}` view. An interval that contains 0 "
             f"is a tie. {ref} AIQ: {_f(ref_aiq)}.", "",
             f"| family | AIQ | {ref} − family | {block['confidence']:.0%} CI | verdict |", "|---|---:|---:|---|---|"]
    for fam, row in families.items():
        word = {"win": f"{ref} wins", "loss": f"{ref} loses", "tie": "tie"}[row["verdict"]]
        lines.append(f"| {fam} | {row['aiq']:.3f} | {row['difference']:+.4f} | "
                     f"[{row['ci_low']:+.4f}, {row['ci_high']:+.4f}] | {word} |")
    return lines


def iso_accuracy_lines(block: dict | None) -> list[str]:
    """The saving in a user's terms: energy at the best single's accuracy, and the oracle's savings captured.
    Shared by report.md and the generated study pages."""
    if not block:
        return []
    pct = lambda ci: f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "n/a"
    span = lambda ci: f"[{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "n/a"
    lines = ["", "## Hindsight bound: the saving at the best single model's test accuracy", "",
             "Chosen on test, so no deployed system can bank it: the cheapest point of each policy that test shows "
             "within the tolerance of the best single model. The headline is the deployed point above.", "",
             f"Best single `{block['best_single']}`: accuracy {block['best_accuracy']:.3f} at "
             f"{_f(block['best_j_per_query'])} J/query; the oracle needs "
             f"{_f(100 * (block['oracle_energy_share'] or 0), 1)}% of that energy. Per policy, its cheapest operating "
             f"point with test accuracy ≥ {block['best_accuracy']:.3f} − "
             f"{block['tolerance']:g}, as a share of the best single's energy (the best single itself when none "
             f"qualifies: 100%), with {block['confidence']:.0%} paired-bootstrap intervals over the test queries "
             f"({block['samples']} resamples; `{block.get('view', '?')}` view). docs/metrics.md.", "",
             "| policy | reached | point | accuracy | J/query | energy share % | CI | oracle savings captured % | CI |",
             "|---|---|---|---:|---:|---:|---|---:|---|"]
    rows = list(block["policies"].items())
    if "champion" in block:
        rows = [(f"**champion** ({block['champion']['name']})", block["champion"])] + rows
    for name, row in rows:
        share = row["energy_share"]
        lines.append(f"| {name} | {_f(row['reached'])} | {row['point'] or 'best single'} | {row['accuracy']:.3f} "
                     f"| {_f(row['j_per_query'])} | {_f(None if share is None else 100 * share, 1)} "
                     f"| {pct(row['energy_share_ci'])} | {_f(row['oracle_savings_captured_pct'], 1)} "
                     f"| {span(row['oracle_savings_captured_pct_ci'])} |")
    return lines


def write_sweep_csv(report: dict, path: Path) -> Path:
    view = report["headline_view"]
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["family", "router", "lam", "log10_lam", "accuracy", "j_per_query", "j_per_query_models_only",
                    "expensive_share", "energy_source"])
        for fam, f in report["families"].items():
            s = f["sweep"]
            for i, name in enumerate(s["router"]):
                r = report["routers"][name]["views"]
                w.writerow([fam, name, s["lam"][i], math.log10(s["lam"][i]), s["accuracy"][i], s["j_per_query"][i],
                            r["models_only"]["j_per_query"], s["expensive_share"][i], r[view]["energy_source"]])
    return path


def _plots(report: dict, plot_dir: Path) -> dict[str, Path]:
    view = report["headline_view"]
    src = report["views"][view]["energy_source"]
    plot_dir.mkdir(parents=True, exist_ok=True)
    routers = report["routers"]
    points = {
        "singles": {c: (s["views"][view]["j_per_query"], s["views"][view]["accuracy"])
                    for c, s in report["singles"].items()},
        "oracle": (report["oracle"]["views"][view]["j_per_query"], report["oracle"]["views"][view]["accuracy"]),
        "routers": {n: (r["views"][view]["j_per_query"], r["views"][view]["accuracy"], r["family"], r["lam"])
                    for n, r in routers.items()},
        "cascade": [(p["j_per_query"], p["accuracy"]) for p in (report.get("cascade") or {}).get("test_frontier", [])],
        "deployed": ((report["deployed"]["test"]["j_per_query"], report["deployed"]["test"]["accuracy"],
                      report["deployed"].get("served", "deployed")) if report.get("deployed") else None),
    }
    front = {("single", n) for n, e in report["singles"].items() if e["views"][view]["on_frontier"]}
    front |= {("router", n) for n, e in routers.items() if e["views"][view]["on_frontier"]}
    out = {"accuracy_vs_energy": plot_accuracy_vs_energy(points, front, src, plot_dir / FRONTIER_PLOT)}
    if report["families"]:
        sweeps = {f: {**v["sweep"], "lambda_star": v["lambda_star"]} for f, v in report["families"].items()}
        out["lambda_sweep"] = plot_lambda_sweep(sweeps, src, plot_dir / "lambda_sweep.png")
        out["lambda_star_by_task"] = plot_lambda_star_by_task(
            {f: v.get("lambda_star_per_task", {}) for f, v in report["families"].items()},
            report["config"]["lambdas"] if "config" in report else None, plot_dir / "lambda_star_by_task.png")
    by_cost = sorted(report["candidates"], key=lambda c: points["singles"][c][0])
    for fam in sorted({r["family"] for r in routers.values()}):
        members = sorted((n for n, r in routers.items() if r["family"] == fam), key=lambda n: routers[n]["lam"] or 0)
        mixes = {(n if routers[n]["lam"] is None else f"lambda={routers[n]['lam']:g}"):
                 {t: b["share"] for t, b in routers[n]["views"][view]["per_task"].items()} for n in members}
        key = f"routing_mix_{safe_name(fam)}"
        out[key] = plot_routing_mix(fam, mixes, by_cost, plot_dir / f"{key}.png")
    return out


def write_outputs(report: dict, out_dir: Path, cfg: EvaluateConfig) -> tuple[dict, dict[str, Path]]:
    """Write every output file; return (headline metrics, {name: path})."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = clean(report)
    metrics = headline_metrics(report)
    paths = {"metrics": out_dir / "metrics.json", "report": out_dir / "report.json",
             "markdown": out_dir / "report.md", "sweep": out_dir / "sweep.csv"}
    paths["metrics"].write_text(json.dumps(metrics, indent=2, allow_nan=False) + "\n")
    paths["report"].write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    paths["markdown"].write_text(markdown(report, cfg.plots))
    write_sweep_csv(report, paths["sweep"])
    if "cascade" in report:  # the chosen chains, as files `serve` runs
        write_chain_files(report["cascade"], out_dir / "cascade")
    if cfg.plots:
        paths.update({f"plot_{k}": v for k, v in _plots(report, out_dir / "plots").items()})
    return metrics, paths
