"""The deployed point in metrics.json (flat, for `dvc metrics` and MLflow) and in the reports (for people)."""

from __future__ import annotations

from jouleroute.evaluation.formatting import fmt as _f
from jouleroute.policy.kinds import kind_of
from jouleroute.policy.target import Target

FIGURES = ("accuracy_diff_vs_best", "energy_share_of_best", "accuracy_diff_vs_reference", "routing_gain")


def deployed_metrics(block: dict, energy_source: str) -> dict:
    """metrics.json's ``deployed``: the choices, their stability, and the test figures with their CIs as scalars."""
    test, singles = block["test"], block["singles"]
    stability = {**singles.get("stability", {}), **block.get("stability", {})}
    out = {"served": block.get("served", block["champion"]), "policy": block.get("policy", "route"),
           "deployed_name": (block.get("deployed") or {}).get("name"),
           "single": block.get("single"), "champion": block["champion"], "family": block["family"], "lam": block["lam"],
           "chosen_by": block["chosen_by"], "met_on_selection": block.get("met_on_selection_across_kinds"),
           "selection_data": block["selection_sweep"]["data"], "champion_met_on_selection": block["met_on_selection"],
           "n_selection_queries": block["selection_sweep"]["n_queries"],
           "best_single": singles["best_single"]["candidate"], "reference_single": singles["reference_single"]["candidate"],
           "stability": {k: v for k, v in stability.items() if k not in ("samples", "lam_interval")}
           | {"champion_first_on_utility": block.get("champion_first_on_utility")},
           "accuracy": test["accuracy"], "j_per_query": test["j_per_query"],
           "best_accuracy": test["best_accuracy"], "best_j_per_query": test["best_j_per_query"],
           "reference_accuracy": test["reference_accuracy"], "reference_j_per_query": test["reference_j_per_query"],
           "noninferiority_margin": test["noninferiority_margin"], "noninferiority": test["noninferiority"],
           "within_margin": test["within_margin"], "shortfall": test["shortfall"], "routing": test["routing"],
           "energy_source": energy_source, "view": test["view"], "n_test_queries": test["n_queries"]}
    for name in FIGURES:
        out[name] = test[name]
        ci = test.get(f"{name}_ci")
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = (ci if ci else (None, None))
    models = test.get("models_only")
    if models:  # the router's choices alone, before its own cost
        ci = models["routing_gain_ci"] or (None, None)
        out |= {"routing_gain_models_only": models["routing_gain"], "routing_gain_models_only_ci_low": ci[0],
                "routing_gain_models_only_ci_high": ci[1]}
    return out


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ci(ci, pct: bool = False, sign: bool = False) -> str:
    if not ci:
        return "n/a"
    fmt = (lambda x: f"{100 * x:.1f}%") if pct else (lambda x: f"{x:+.3f}" if sign else f"{x:.3f}")
    return f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def deployed_lines(block: dict | None, energy_source: str) -> list[str]:
    """The headline section of report.md and of every study page: what was chosen on selection data, and the
    deployed point scored once on test against the best and the reference single."""
    if not block:
        return ["", "## The deployed point", "", "No deployed point: no champion was chosen on val, or it cannot be "
                "scored here (report.json's `val_contest`)."]
    test, singles, sweep = block["test"], block["singles"], block["selection_sweep"]
    best, ref = singles["best_single"], singles["reference_single"]
    parts = (singles.get("stability"), block.get("stability"), block.get("kind_stability"))  # shares: floats
    stab = {k: (v, part["samples"]) for part in parts if part for k, v in part.items() if isinstance(v, float)}
    stable = lambda key: (f" (same choice in {_pct(stab[key][0])} of {stab[key][1]} resamples)"  # noqa: E731
                          if key in stab else "")
    spread = (block.get("stability") or {}).get("lam_interval")
    goal = (f"accuracy at least the best single's minus {singles['tolerance']:g}" if block["chosen_by"] == "iso_accuracy"
            else Target.of(block["chosen_by"], block["floor_or_share"]).describe())
    routed = kind_of(block).routes
    met = ("meets it on selection data" if block["met_on_selection"] else
           f"no λ meets it on selection data ({block['reason']})" + ("; the closest λ is deployed" if routed else ""))
    served = block.get("served") or f"{block['champion']} at λ={block['lam']:.4g}"
    lines = ["", "## The deployed point", "",
             f"**Deployed: {served}.** Chosen on selection data only ({singles['n_queries']} train and val queries "
             f"for the singles; the champion's sweep over {len(sweep['lam'])} λ on {sweep['n_queries']} queries, "
             f"{sweep['data']}); test scores each choice once (docs/metrics.md, \"The deployed point\").", "",
             f"- Best single: `{best['candidate']}` ({best['accuracy']:.3f} on selection){stable('best_single')}.",
             f"- Reference single, the single the target picks alone: `{ref['candidate']}` "
             f"({ref['accuracy']:.3f} at {ref['j_per_query']:.4g} J/query on selection){stable('reference_single')}.",
             f"- Router champion `{block['champion']}`"
             + ("" if block.get("champion_first_on_utility") is None or block.get("val_winner", block["champion"])
                != block["champion"] else
                f" (first on mean val utility in {_pct(block['champion_first_on_utility'])} of val resamples)")
             + f" at λ = {block['lam']:.4g}, the target ({goal}) {met}{stable('lam')}"
             + (f"; 90% of the resamples choose λ in [{spread[0]:.3g}, {spread[1]:.3g}]" if spread else "") + ".",
             *_policy_lines(block, stable), "",
             *_contender_table(block.get("contenders"), energy_source), "",
             f"On test ({test['n_queries']} queries, {test['confidence']:.0%} paired-bootstrap intervals over "
             f"{test['samples']} resamples, `{test['view']}` view, energy **{energy_source}**"
             + ("" if test["overhead_metered"] or not routed else "; the router's own cost was not metered for this point")
             + "):", "",
             f"| policy | accuracy | J/query [{energy_source}] |", "|---|---:|---:|",
             f"| **deployed** ({served}) | {test['accuracy']:.3f} "
             f"| {test['j_per_query']:.4g} |",
             f"| best single `{best['candidate']}` | {test['best_accuracy']:.3f} | {test['best_j_per_query']:.4g} |",
             f"| reference single `{ref['candidate']}` | {test['reference_accuracy']:.3f} "
             f"| {test['reference_j_per_query']:.4g} |", "",
             f"- Accuracy vs the best single: {test['accuracy_diff_vs_best']:+.3f} "
             f"{_ci(test['accuracy_diff_vs_best_ci'], sign=True)}: **{test['noninferiority']}** at the margin "
             f"{test['noninferiority_margin']:g}"
             + ("" if test["within_margin"] else f"; the point estimate falls short of it by {test['shortfall']:.3f}")
             + ".",
             f"- Energy share of the best single: **{_pct(test['energy_share_of_best'])}** "
             f"{_ci(test['energy_share_of_best_ci'], pct=True)}.",
             f"- Routing gain (J/query of the deployed point over the reference single's): "
             f"**{_f(test['routing_gain'])}** {_ci(test['routing_gain_ci'])}, accuracy "
             f"{test['accuracy_diff_vs_reference']:+.3f} {_ci(test['accuracy_diff_vs_reference_ci'], sign=True)} "
             f"against it: {test['routing']}."]
    models = test.get("models_only")
    if models:
        lines.append(f"- The models' energy alone (the router's own cost left out): {_pct(models['energy_share_of_best'])}"
                     f" of the best single's, routing gain {_f(models['routing_gain'])} {_ci(models['routing_gain_ci'])}"
                     f": {models['routing']}.")
    return lines


def _policy_lines(block: dict, stable) -> list[str]:
    """Whether routing pays over the single model the target picks alone, on selection data."""
    alone = block.get("single_on_selection")
    if "policy" not in block:
        return []
    if alone is None:
        return [f"- No single model meets the target on selection data: {block.get('served')} is deployed.",
                *_kinds_table(block.get("kinds"))]
    point = next((c for c in block.get("contenders", []) if c["name"] == block["champion"]), None)
    own = "" if not point or not point.get("overhead_j") else f", its own cost {point['overhead_j']:.3g} J/query included"
    figures = ("" if point is None else f" ({point['accuracy_diff_vs_best']:+.3f} vs the best single, "
               f"{_pct(point['energy_share_of_best'])} of its energy{own})")
    verdict = kind_of(block).verdict(block)
    return [f"- Without a router the target picks `{alone['candidate']}` ({alone['accuracy_diff_vs_best']:+.3f} vs "
            f"the best single, {_pct(alone['energy_share_of_best'])} of its energy, on selection data). The champion"
            f"{figures} " + verdict + f"{stable('policy')}.", *_kinds_table(block.get("kinds"))]


def _kinds_table(kinds: list[dict] | None) -> list[str]:
    """Every kind's own choice on selection data, and whether selection's uncertainty admits it (issue 47)."""
    if not kinds:
        return []
    rows = [f"| {k['kind']} | `{k['name']}` | {k['data']} ({k['n_queries']}) | {k['accuracy_diff_vs_best']:+.3f}"
            f"{_ci(k.get('accuracy_diff_ci'), sign=True)} | {_pct(k['energy_share_of_best'])} | "
            f"{'yes' if k['admissible'] else 'no'} |" for k in kinds]
    return ["", "Every policy the deployment weighed on selection data, whatever its kind (a router family at its λ, "
                "the cascade's rule scored out of fold, each single model). A policy is admissible for the default "
                "target when its accuracy interval against the best single stays above −margin:", "",
            "| kind | policy | scored on (queries) | accuracy − best [CI] | energy share | admissible |",
            "|---|---|---|---:|---:|---|", *rows]


def _contender_table(contenders: list[dict] | None, energy_source: str) -> list[str]:
    """Every contender's deployed point on selection data: how the champion was chosen."""
    if not contenders:
        return []
    rows = [f"| `{c['name']}` | {c['data']} ({c['n_queries']}) | {c['lam']:.4g} | {'yes' if c['met_on_selection'] else 'no'} "
            f"| {c['accuracy_diff_vs_best']:+.3f} | {_pct(c['energy_share_of_best'])} |" for c in contenders]
    return ["Contenders on selection data, each at its own deployed λ (energy share of the best single on the same "
            f"queries, the router's own cost included where the headline counts it; energy {energy_source}):", "",
            "| contender | scored on (queries) | λ | meets the target | accuracy − best | energy share |",
            "|---|---|---:|---|---:|---:|", *rows]


def deployed_summary(dep: dict | None) -> list[str]:
    """`jouleroute where`'s first lines: the deployed point and its figures, from metrics.json's ``deployed``."""
    if not dep:
        return ["deployed point: none (no champion chosen on val, or it cannot be scored here: rerun evaluate)"]
    ci = lambda name, unit="", scale=1.0: ("" if dep[f"{name}_ci_low"] is None else  # noqa: E731
                                           f" [{scale * dep[f'{name}_ci_low']:.3g}{unit}, "
                                           f"{scale * dep[f'{name}_ci_high']:.3g}{unit}]")
    src = dep["energy_source"]
    single = dep.get("policy") == "single"
    met = ([] if dep.get("champion_met_on_selection", dep["met_on_selection"]) or not kind_of(dep).routes else
           ["  no λ met the target on selection data: the closest is deployed"])
    served = dep.get("served") or f"{dep['champion']} at λ={dep['lam']:.4g}"
    gain = (f"  routing not deployed: it did not pay on selection data (champion {dep['champion']} at "
            f"λ={dep['lam']:.4g}), so every query goes to {dep['single']}" if single else
            f"  routing gain over the reference single {dep['reference_single']} "
            f"({dep['reference_accuracy']:.3f} at {dep['reference_j_per_query']:.4g} J/query [{src}]): "
            f"{dep['routing_gain']:.3f}{ci('routing_gain')}: {dep['routing']}")
    return [f"deployed point (what `jouleroute serve` serves): {served}, chosen by {dep['chosen_by']} on "
            f"{dep['n_selection_queries']} selection queries ({dep['selection_data']})", *met,
            f"  on {dep['n_test_queries']} test queries: accuracy {dep['accuracy']:.3f}, "
            f"{dep['accuracy_diff_vs_best']:+.3f}{ci('accuracy_diff_vs_best')} vs best single "
            f"{dep['best_single']} ({dep['noninferiority']} at margin {dep['noninferiority_margin']:g})",
            f"  energy {dep['j_per_query']:.4g} J/query [{src}] = {100 * dep['energy_share_of_best']:.1f}%"
            f"{ci('energy_share_of_best', '%', 100.0)} of the best single's", gain]
