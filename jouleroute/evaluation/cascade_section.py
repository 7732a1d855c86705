"""The cascade section of report.md and of every page (``cascade_lines``), and metrics.json's ``cascade``
(``cascade_metrics``): rendered from report.json's ``cascade`` block (evaluation/cascades.py computes it)."""

from __future__ import annotations

from jouleroute.policy.target import Target


def _ci(ci, pct: bool = False) -> str:
    return "" if not ci else f" [{100 * ci[0]:.0f}%, {100 * ci[1]:.0f}%]" if pct else f" [{ci[0]:+.3f}, {ci[1]:+.3f}]"


def cascade_lines(block: dict | None, energy_source: str) -> list[str]:
    """The cascade section of report.md and of every study page."""
    if not block:
        return []
    lines = ["", "## Cascades that read the answers", ""]
    if "skipped" in block:
        return lines + [block["skipped"].capitalize() + "."]
    decided = block["decision"]["test"]
    lines += [f"{block['n_chains']} chains searched on {block['n_selection_queries']} selection queries in "
              f"{_seconds(block['search_seconds'])} ({_seconds(block['seconds'])} for this whole section); each chosen chain scored once on test against the best single "
              f"`{block['best_single']}` (energy **{energy_source}**, summed over every model asked; "
              f"{decided['confidence']:.0%} paired-bootstrap intervals). *Out of fold*: the target's rule scored on "
              "the selection queries by chains chosen without them (choose on k−1 folds, score on the held-out "
              "one; a calibrated slack, inside each): how much of a chain's selection lead survives choosing it.", "",
              "| chosen for | chain | meets it on selection | out of fold: accuracy − best [CI], energy share "
              "| test accuracy − best [CI] | energy share of best [CI] | stopped at each stage | verdict |",
              "|---|---|---|---|---:|---:|---|---|"]
    rows = [(f"{name}: {_describe(entry['selection'])}", entry["selection"], entry["test"], entry.get("out_of_fold"))
            for name, entry in block["targets"].items()]
    rows.append(("most accurate at ≤ the best single's energy", block["decision"]["selection"], decided,
                 block["decision"].get("out_of_fold")))
    for label, chosen, test, oof in rows:
        stops = ", ".join(f"{100 * s:.0f}%" for s in test["stop_share"])
        held = (f"{oof['accuracy_diff_vs_best']:+.3f}{_ci(oof.get('accuracy_diff_vs_best_ci'))}, "
                f"{100 * oof['energy_share_of_best']:.0f}%" if oof else "")
        lines.append(f"| {label} | `{test['chain']}` | {'yes' if chosen['met_on_selection'] else 'no'} | {held} "
                     f"| {test['accuracy_diff_vs_best']:+.3f}{_ci(test['accuracy_diff_vs_best_ci'])} "
                     f"| {100 * test['energy_share_of_best']:.0f}%{_ci(test['energy_share_of_best_ci'], True)} "
                     f"| {stops} | {test['verdict']} |")
    lines += ["", f"AIQ of the selection frontier's chains on test: **{block['aiq']:.3f}** (the routers' AIQ is "
                  "computed the same way; the accuracy-vs-energy plot draws these chains as `cascade`). The chosen "
                  "chains are chain files in `cascade/` beside this report: `jouleroute serve` runs one with "
                  "`gateway.router.kind: cascade` (docs/gateway.md)."]
    above = decided["verdict"] == "above"
    lines += ["", ("The decision figure: a chain at or below the best single's energy is **more accurate than the "
                   "best single** on test, the interval excluding 0." if above else
                   f"The decision figure: no chain chosen on selection beats the best single's accuracy on test "
                   f"(the most accurate at or below its energy: {decided['accuracy_diff_vs_best']:+.3f}"
                   f"{_ci(decided['accuracy_diff_vs_best_ci'])}, a {decided['verdict']}).")]
    return lines


def _seconds(value: float) -> str:
    return "< 0.01 s" if value < 0.01 else f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


def _describe(selection: dict) -> str:
    target, slack = selection["target"], selection.get("slack")  # a floor target's calibrated slack, when above 0
    above = "" if not slack else f", chosen {slack:g} above it" if selection.get("slack_met", True) else \
        f", no chain {slack:g} above it: the most accurate"
    return Target.of(target["kind"], target["value"]).describe() + above


def cascade_metrics(block: dict) -> dict:
    """metrics.json's ``cascade``: the skip reason, or each chosen chain's test figures as scalars."""
    if "skipped" in block:
        return {"skipped": block["skipped"]}

    def flat(test: dict) -> dict:
        ci = test.get("accuracy_diff_vs_best_ci") or (None, None)
        share_ci = test.get("energy_share_of_best_ci") or (None, None)
        return {"chain": test["chain"], "accuracy": test["accuracy"], "j_per_query": test["j_per_query"],
                "accuracy_diff_vs_best": test["accuracy_diff_vs_best"], "ci_low": ci[0], "ci_high": ci[1],
                "energy_share_of_best": test["energy_share_of_best"], "share_ci_low": share_ci[0],
                "share_ci_high": share_ci[1], "stop_share": test["stop_share"], "verdict": test["verdict"]}

    def with_oof(entry: dict) -> dict:
        oof = entry.get("out_of_fold") or {}
        ci = oof.get("accuracy_diff_vs_best_ci") or (None, None)
        return flat(entry["test"]) | ({"oof_accuracy_diff_vs_best": oof["accuracy_diff_vs_best"], "oof_ci_low": ci[0],
                                       "oof_ci_high": ci[1], "oof_energy_share_of_best": oof["energy_share_of_best"]}
                                      if oof else {})

    return {"best_single": block["best_single"], "n_chains": block["n_chains"], "aiq": block["aiq"],
            "decision": with_oof(block["decision"]),
            **{name: with_oof(entry) for name, entry in block["targets"].items()}}
