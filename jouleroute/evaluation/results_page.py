"""The one results page: report.md, every study page and the embedded default's page render their results here.

In order: the labels that trained the policy when they are not gold (evaluation/labels_section.py), the deployed
policy (its kind and settings; test accuracy − the best single with CI and verdict, energy share with CI, gain over
the reference single with CI; how it was chosen on selection data, with every kind's own choice beside it:
evaluation/deployed_section.py), the frontier plot with every kind's points (singles, oracle, router sweeps, the
cascade's frontier chains, the deployed policy), the cascades chosen per target, the pool, and where the routers
land. Pages add their own sections after it (a study's training curves, the embedded default's per-task table). It
renders and computes nothing: every figure is read from report.json.
"""

from __future__ import annotations

from jouleroute.evaluation.cascade_section import cascade_lines
from jouleroute.evaluation.deployed_section import deployed_lines
from jouleroute.evaluation.formatting import fmt as _f
from jouleroute.evaluation.labels_section import labels_lines

FRONTIER_PLOT = "accuracy_vs_energy.png"  # in the evaluate folder's plots/ (evaluation/report.py draws it)


def results_lines(report: dict, plot: str | None = None) -> list[str]:
    """The page's results (module doc); ``plot``: the frontier plot's path relative to the page, when it has one."""
    view = report["headline_view"]
    source = report["views"][view]["energy_source"]
    lines = labels_lines(report.get("labels")) + deployed_lines(report.get("deployed"), source)
    if plot:
        lines += ["", f"![Accuracy against J/query on test: every single model, the oracle, each router family's "
                      f"λ sweep, the cascade's frontier chains and the deployed policy]({plot})"]
    lines += cascade_lines(report.get("cascade"), source)
    return lines + ["", *pool_lines(report, view, source), "", *router_lines(report, view, source)]


def pool_lines(report: dict, view: str, source: str) -> list[str]:
    lines = ["## Single candidates and oracle", "",
             f"| policy | accuracy | J/query [{source}] | J/correct [{source}] | latency p95 s |", "|---|---|---|---|---|"]
    for name, s in list(report["singles"].items()) + [("**oracle**", report["oracle"])]:
        v = s["views"][view]
        lines.append(f"| {name} | {_f(v['accuracy'])} | {_f(v['j_per_query'])} | {_f(v['j_per_correct'])} "
                     f"| {_f(v['latency_p95_s'])} |")
    ref = report["views"][view]
    return lines + ["", f"Cheapest single: `{ref['cheapest_single']}`; most accurate single: `{ref['best_single']}`; "
                        f"AIQ of the singles alone (zero router): {_f(ref['aiq_zero_router'])}."]


def router_lines(report: dict, view: str, source: str) -> list[str]:
    """Every router run on test (each family's λ sweep, the deployed point, the reference rules), one table."""
    if not report["routers"]:
        return []
    lines = ["## Where the routers land", "",
             f"| router | family | lambda | accuracy | J/query [{source}] | J/query models only | AIQ | PGR "
             "| % oracle savings captured | Pareto |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in report["routers"].items():
        v, m = r["views"][view], r["views"]["models_only"]
        ci = v.get("accuracy_ci")
        acc = _f(v["accuracy"]) + (f" [{_f(ci[0])}, {_f(ci[1])}]" if ci else "")
        lines.append(f"| {name} | {r['family']} | {_f(r['lam'])} | {acc} | {_f(v['j_per_query'])} "
                     f"| {_f(m['j_per_query'])} | {_f(v['aiq'])} | {_f(v['pgr'])} "
                     f"| {_f(v['savings_captured_pct'], 1)} | {_f(v['on_frontier'])} |")
    return lines + ["", savings_note(report, view)]


def savings_note(report: dict, view: str) -> str:
    """What "% oracle savings captured" means here, with this run's two ends, and why a value is negative."""
    best = report["views"][view]["best_single"]
    e_best = report["singles"][best]["views"][view]["j_per_query"]
    e_oracle = report["oracle"]["views"][view]["j_per_query"]
    values = [r["views"][view].get("savings_captured_pct") for r in report["routers"].values()]
    negative = sum(1 for v in values if v is not None and v < 0)
    return (f"% oracle savings captured = 100 × (E_best − E_router) / (E_best − E_oracle): the share of the "
            f"{_f(e_best)} − {_f(e_oracle)} J/query the oracle saves against always asking the most accurate single "
            f"(`{best}`) that a router keeps, counted only while its accuracy is within evaluate.accuracy_tolerance "
            f"of that single's (0 below). 100 is the oracle's saving, above 100 cheaper than the oracle by giving up "
            f"accuracy; below 0 (" + (f"{negative} router(s) here" if negative else "none here") +
            f") the router spends more J/query than `{best}` alone, e.g. −100 is one whole oracle saving more "
            "(docs/metrics.md).")
