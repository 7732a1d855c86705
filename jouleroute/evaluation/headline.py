"""The headline of an evaluation, from its metrics.json: rows for people, one compact dict for DVC.

Pure python (no torch), so `jouleroute where` can print it without loading the routers.
"""

from __future__ import annotations

from jouleroute.best_single import best_single
from jouleroute.policy.kinds import kind_of


def headline_rows(metrics: dict, reference_lam: float) -> dict[str, dict]:
    """The headline as rows (a family, the oracle, the best single; for people: `jouleroute where`).
    A family's accuracy and J/query are its operating point nearest the reference λ (``router.lam``)."""
    r = lambda x: round(x, 4) if isinstance(x, float) else x
    source = metrics["energy_source"]
    singles = metrics["singles"]
    names = list(singles)
    best = names[best_single([singles[c]["accuracy"] for c in names], [singles[c]["j_per_query"] for c in names])]
    rows = {"oracle": {**{k: r(v) for k, v in metrics["oracle"].items()}, "energy_source": source},
            # a single candidate's AIQ is the zero-router AIQ: the frontier of the singles alone
            "best_single": {"accuracy": r(singles[best]["accuracy"]), "j_per_query": r(singles[best]["j_per_query"]),
                            "aiq": r(metrics["aiq_zero_router"]), "energy_source": source}}
    for family, block in metrics.get("families", {}).items():
        members = {n: m for n, m in metrics["routers"].items() if n.startswith(f"{family}:")}
        point = min(members, key=lambda n: abs(float(n.split(":")[1]) - reference_lam)) if members else None
        rows[family] = {"aiq": r(block["aiq"]), "energy_source": source}
        if point is not None:
            rows[family] |= {"accuracy": r(members[point]["accuracy"]), "j_per_query": r(members[point]["j_per_query"]),
                             "lam": float(point.split(":")[1])}
            if "j_per_query_models_only" in members[point]:  # j_per_query includes the router's own overhead
                rows[family]["j_models_only"] = r(members[point]["j_per_query_models_only"])
        if block.get("lambda_star") is not None:
            rows[family]["lambda_star"] = r(block["lambda_star"])
    for name, router in metrics["routers"].items():
        if ":" not in name:  # a router without a λ sweep (random): one operating point
            rows[name] = {k: r(router[k]) for k in ("accuracy", "j_per_query", "aiq")} | {"energy_source": source}
    return rows

# The LM router without the kNN evidence, swept beside it when val chose to add some: a diagnostic, not a family
# one deploys (evaluate reports it; the compact headline leaves it out).
LM_ALONE = "lm_alone"


def headline(metrics: dict, reference_lam: float) -> dict:
    """The compact, git-tracked comparison for `dvc metrics show/diff` and `dvc exp show`: ONE file with short keys
    that are unique (so `dvc exp show` needs no ``file:`` prefix), narrow enough that the seven pipelines' rows fit
    a terminal (≤ 250 columns). In order (`dvc exp show` keeps it): the **deployed policy** (``dep``: its kind,
    ``route`` or ``single``; its name, the router family or the model; the λ of a route; its test accuracy, the
    difference to the best single, the energy share of the best single, the gain over the reference single and the
    non-inferiority verdict), the best single's name (``best``), the oracle's accuracy, the energy source, and the
    test-chosen iso-accuracy share as a labelled hindsight bound (``hindsight_iso``). Intervals, AIQ per family,
    the cascades and the reference single are in artifacts/evaluate/metrics.json and on the pages, under the same
    names. ``reference_lam``: kept for older metrics without a deployed point (the LM router's point nearest it)."""
    rows = headline_rows(metrics, reference_lam)
    r = lambda x: round(x, 3) if isinstance(x, float) else x
    out: dict = {}
    dep = metrics.get("deployed")
    if dep:
        kind = kind_of(dep)
        out["dep"] = {"kind": kind.name, "name": kind.compact(dep),
                      "lam": r(dep["lam"]) if kind.routes else None, "acc": r(dep["accuracy"]),
                      "dacc": r(dep["accuracy_diff_vs_best"]), "share": r(dep["energy_share_of_best"]),
                      "gain": r(dep["routing_gain"]), "verdict": dep["noninferiority"]}
        out["best"] = dep["best_single"]
    elif "lm" in rows:
        out |= {"acc": r(rows["lm"].get("accuracy")), "J": r(rows["lm"].get("j_per_query"))}
    out |= {"oracle": r(rows["oracle"]["accuracy"]), "source": metrics["energy_source"]}
    labels = metrics.get("labels") or {}
    out["labels"] = labels.get("source_label")  # which labels trained the policy (gold, reference:<c>, vote)
    # chosen on test: the bound no deployed system reaches by construction (docs/metrics.md)
    out["hindsight_iso"] = iso_headline(metrics.get("iso_accuracy")).get("share")
    return _pruned(out)


def _pruned(tree: dict) -> dict:
    """``tree`` without None leaves and empty branches (an interval not computed has no column)."""
    out = {k: _pruned(v) if isinstance(v, dict) else v for k, v in tree.items()}
    return {k: v for k, v in out.items() if v is not None and v != {}}


def iso_headline(block: dict | None) -> dict:
    """The saving a user decides by (docs/metrics.md): the champion's iso-accuracy energy share of the best single
    model with its CI, the share of the oracle's savings it captures, and beside it the LM router's, the fixed
    rule's (task_best) and the oracle's own share. {} when evaluate computed none."""
    if not block:
        return {}
    r = lambda x: round(x, 3) if isinstance(x, float) else x
    policies, champion = block.get("policies", {}), block.get("champion")
    out: dict = {}
    if champion:
        out |= {"family": champion["family"], "share": r(champion["energy_share"]),
                "lo": r(champion.get("energy_share_ci_low")), "hi": r(champion.get("energy_share_ci_high")),
                "captured": r(champion.get("oracle_savings_captured_pct"))}
    for key, family in (("lm", "lm"), ("rule", "task_best")):
        if family in policies:
            out[key] = r(policies[family]["energy_share"])
    out["oracle"] = r(block.get("oracle_energy_share"))
    return {k: v for k, v in out.items() if v is not None}
