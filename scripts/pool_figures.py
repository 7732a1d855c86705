"""The figures across pools (scripts/doc_figures.py's `savings` and `phase-across-pools`): one row per pipeline,
the main one and every study, from each pipeline's evaluate metrics."""

from __future__ import annotations

import json

from figure_sources import ROOT, SourceMissing


def savings() -> str:
    """One row per pipeline (the main one and every study): the deployed point, chosen on selection data and
    scored once on test, against the best and the reference single; the test-chosen share as a hindsight bound."""
    from jouleroute.evaluation.headline import iso_headline

    rows = ["| pool | best single (test acc, J/query) | reference single (test acc, J/query) | deployed: kind, policy "
            "| accuracy − best [95% CI], verdict | energy share of best [95% CI] | routing gain vs reference [95% CI] "
            "| hindsight bound | energy |", "|---|---|---|---|---|---|---|---:|---|"]
    pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    for pool, metrics in _evaluated_pipelines():
        dep = metrics.get("deployed")
        label = "embedded default (`make run`)" if pool == "embedded" else f"`{pool}`"
        hindsight = pct(iso_headline(metrics.get("iso_accuracy")).get("share"))
        if not dep:
            rows.append(f"| {label} | | | no deployed point | | | | {hindsight} | `{metrics.get('energy_source', '?')}` |")
            continue
        ci = lambda name, f: "" if dep[f"{name}_ci_low"] is None else \
            f" [{f(dep[f'{name}_ci_low'])}, {f(dep[f'{name}_ci_high'])}]"  # noqa: E731
        signed = lambda x: f"{x:+.3f}"  # noqa: E731
        rows.append(f"| {label} | {dep['best_single']} ({dep['best_accuracy']:.3f}, {dep['best_j_per_query']:.4g}) "
                    f"| {dep['reference_single']} ({dep['reference_accuracy']:.3f}, {dep['reference_j_per_query']:.4g}) "
                    f"| {_served(dep)} ({dep['accuracy']:.3f}, {dep['j_per_query']:.4g}) "
                    f"| {signed(dep['accuracy_diff_vs_best'])}{ci('accuracy_diff_vs_best', signed)}, "
                    f"{dep['noninferiority']} "
                    f"| {pct(dep['energy_share_of_best'])}{ci('energy_share_of_best', pct)} "
                    f"| {dep['routing_gain']:.2f}{ci('routing_gain', lambda x: f'{x:.2f}')} "
                    f"| {hindsight} | `{dep['energy_source']}` |")
    return "\n".join(rows)


def cascades() -> str:
    """One row per pipeline and cascade target (issue 42): the chain chosen on selection, its rule's out-of-fold
    figures on selection, and its test figures against the best single, from each evaluate metrics.json."""
    rows = ["| pool | chosen for | chain | out of fold on selection: accuracy − best [95% CI], energy share "
            "| test accuracy − best [95% CI] | test energy share of best [95% CI] | verdict |",
            "|---|---|---|---|---|---|---|"]
    pct = lambda x: "n/a" if x is None else f"{100 * x:.0f}%"  # noqa: E731
    for pool, metrics in _evaluated_pipelines():
        label = "embedded default (`make run`)" if pool == "embedded" else f"`{pool}`"
        block = metrics.get("cascade") or {"skipped": "cascade off"}
        if "skipped" in block:
            rows.append(f"| {label} | | {block['skipped']} | | | | |")
            continue
        for name in [n for n in block if isinstance(block[n], dict) and "chain" in block[n]]:
            c = block[name]
            oof = "" if c.get("oof_accuracy_diff_vs_best") is None else (
                f"{c['oof_accuracy_diff_vs_best']:+.3f} [{c['oof_ci_low']:+.3f}, {c['oof_ci_high']:+.3f}], "
                f"{pct(c['oof_energy_share_of_best'])}")
            ci = "" if c["ci_low"] is None else f" [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]"
            share_ci = "" if c["share_ci_low"] is None else f" [{pct(c['share_ci_low'])}, {pct(c['share_ci_high'])}]"
            chosen = {"decision": "most accurate at ≤ the best's energy",
                      "router_target": f"`router.target`: {_target_of(pool)}"}.get(name, name)
            rows.append(f"| {label} | {chosen} | `{c['chain']}` | {oof} | {c['accuracy_diff_vs_best']:+.3f}{ci} "
                        f"| {pct(c['energy_share_of_best'])}{share_ci} | {c['verdict']} |")
    return "\n".join(rows)


def _served(dep: dict) -> str:
    """What is deployed, whatever its kind: a route (the champion at its λ), a cascade (its chain) or one model."""
    kind = dep.get("policy", "route")
    if kind == "single":
        return f"single: always {dep['single']}"
    if kind == "cascade":
        return f"cascade: `{dep['deployed_name']}`"
    return f"route: {dep['champion']} at λ {dep['lam']:.3g}"


def _evaluated_pipelines() -> list[tuple[str, dict]]:
    """(pool name, evaluate metrics.json) of every pipeline: the main one and each study. A table across pools is
    written only when all of them have been evaluated on this machine; a partial one would drop the others' rows."""
    from jouleroute.config import load_params

    files = [("embedded", ROOT / "params.yaml")] + [(p.parent.name, p) for p in sorted((ROOT / "studies").glob("*/params.yaml"))]
    out, missing = [], []
    for name, params in files:
        metrics_file = load_params(params).paths.resolve("evaluate_dir", ROOT) / "metrics.json"
        if metrics_file.exists():
            out.append((name, json.loads(metrics_file.read_text())))
        else:
            missing.append("make run" if name == "embedded" else f"make study{'-heldout' if name.startswith('heldout-') else ' STUDY=' + name}")
    if missing:
        raise SourceMissing(f"not every pipeline is evaluated here (run {', '.join(dict.fromkeys(missing))}): a table "
                            "across pools would drop the others' rows")
    return out


def phase_across_pools() -> str:
    """λ* of every family on every task of every evaluated pool: one figure and its table."""
    from jouleroute.evaluation.plots import plot_lambda_star_by_task

    stars: dict[str, dict[str, float | None]] = {}
    lambdas: list[float] = []
    for pool, metrics in _evaluated_pipelines():
        for family, block in metrics.get("families", {}).items():
            for task, lam in (block.get("lambda_star_per_task") or {}).items():
                stars.setdefault(family, {})[f"{pool}/{task}"] = lam
        lambdas += [float(n.split(":")[1]) for n in metrics.get("routers", {}) if ":" in n and
                    n.split(":")[1].replace(".", "", 1).isdigit()]
    if not stars:
        raise SourceMissing("no evaluated pipeline with per-task λ* here (run `make run` / `make study`)")
    figure = ROOT / "docs" / "phase-across-pools.png"
    plot_lambda_star_by_task(stars, sorted(set(lambdas)) or None, figure)
    families = sorted(stars)
    rows = [f"![λ* per task across pools](docs/{figure.name})", "",
            "| pool/task | " + " | ".join(f"λ* {f}" for f in families) + " |", "|---|" + "---:|" * len(families)]
    fmt = lambda v: "none" if v is None else f"{v:.3g}"
    for key in sorted({k for per in stars.values() for k in per}):
        rows.append(f"| {key} | " + " | ".join(fmt(stars[f].get(key)) if key in stars[f] else "" for f in families)
                    + " |")
    return "\n".join(rows)


def no_gold() -> str:
    """One row per no-gold preset (scripts/no_gold_studies.py, issue 48): its labels' agreement with gold per task,
    and the deployed policy chosen on the label-trained selection data and scored on gold test, beside the
    gold-trained pipeline's deployed policy on the same pool."""
    pipelines = dict(_evaluated_pipelines())
    rows = ["| preset | labels | labels vs gold per task: precision / recall of 'correct', agreement [95% CI] "
            "| target (`router.target`) | deployed on labels: policy, accuracy − best [95% CI], verdict, energy share "
            "[95% CI] | deployed on gold (same pool): the same |", "|---|---|---|---|---|---|"]
    for name in sorted(n for n in pipelines if n.startswith("nogold-")):
        metrics, base = pipelines[name], _base_of(name)
        labels = metrics.get("labels") or {}
        quality = (labels.get("quality") or {}).get("by_task", {})
        per_task = "<br>".join(
            f"{task}: {q['precision']:.3f} / {q['recall']:.3f}, {q['agreement']:.3f} "
            f"[{q['agreement_ci'][0]:.3f}, {q['agreement_ci'][1]:.3f}]" for task, q in quality.items()
            if q.get("agreement") is not None) or "n/a"
        coverage = f"{100 * labels['coverage']:.0f}% of queries" if labels.get("coverage") is not None else ""
        rows.append(f"| `{name}` | `{labels.get('source_label', '?')}` ({coverage}; test on "
                    f"{labels.get('test_scored_on', '?')}) | {per_task} | {_target_of(name)} "
                    f"| {_deployed_cell(metrics)} | `{base}` ({_target_of(base)}): "
                    f"{_deployed_cell(pipelines.get(base, {}))} |")
    return "\n".join(rows)


def _target_of(pipeline: str) -> str:
    """The deployment target a pipeline's params state (``router.target``; null: iso-accuracy)."""
    from jouleroute.config import load_params
    from jouleroute.policy.target import effective_target

    folder = ROOT if pipeline == "embedded" else ROOT / "studies" / pipeline
    return effective_target(load_params(folder / "params.yaml").router.target).describe()


def _base_of(preset: str) -> str:
    """The gold-trained pipeline a no-gold preset reads (its params' profile path names it)."""
    from jouleroute.config import load_params

    profile = load_params(ROOT / "studies" / preset / "params.yaml").paths.profile
    if profile.startswith("studies/") and not profile.startswith(f"studies/{preset}/"):
        return profile.split("/")[1]
    return "embedded"


def _deployed_cell(metrics: dict) -> str:
    dep = metrics.get("deployed")
    if not dep:
        return "no deployed point"
    pct = lambda x: f"{100 * x:.0f}%"  # noqa: E731
    diff = f"{dep['accuracy_diff_vs_best']:+.3f}"
    if dep.get("accuracy_diff_vs_best_ci_low") is not None:
        diff += f" [{dep['accuracy_diff_vs_best_ci_low']:+.3f}, {dep['accuracy_diff_vs_best_ci_high']:+.3f}]"
    share = pct(dep["energy_share_of_best"])
    if dep.get("energy_share_of_best_ci_low") is not None:
        share += f" [{pct(dep['energy_share_of_best_ci_low'])}, {pct(dep['energy_share_of_best_ci_high'])}]"
    return f"{_served(dep)}, {diff}, {dep['noninferiority']}, {share}"
