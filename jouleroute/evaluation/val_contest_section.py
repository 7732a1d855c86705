"""The champion's choice on val in the reports: the contenders, the rule, the margins, kNN evidence, per-query
energy. Shared by report.md and the generated study pages."""

from __future__ import annotations

from jouleroute.evaluation.formatting import fmt as _f


def query_energy_lines(block: dict | None) -> list[str]:
    """Per-query energy ê_c(x) on val: its error against the task mean, and which families decide with it."""
    if not block:
        return []
    own, base = block["energy_error_val"]["per_query"], block["energy_error_val"]["task_mean"]
    lines = ["", "## Per-query energy, on val", "",
             f"Each candidate's joules predicted from the query (ridge on the sentence embedding around the task's "
             f"log-mean; routing/baselines/query_energy.py), on {block['n_val_queries']} val queries: mean relative "
             f"error {own['relative_error']:.3f} (task mean {base['relative_error']:.3f}), RMSE of log joules "
             f"{own['log_rmse']:.3f} (task mean {base['log_rmse']:.3f}). A family decides with it only where its "
             "mean val utility rises:", "",
             "| family | val utility, own energy | val utility, per-query energy | own energy's relative error | "
             "adopted |", "|---|---:|---:|---:|---|"]
    for family, row in block["families"].items():
        lines.append(f"| {family} | {row['val_utility_own']:.4f} | {row['val_utility_per_query']:.4f} "
                     f"| {row['energy_error_val_own']:.3f} | {_f(row['adopted'])} |")
    return lines


def val_contest_lines(contest: dict | None) -> list[str]:
    """Which family and checkpoint won on val, by which rule (``evaluate.champion_by``), and by how much."""
    if not contest:
        return []
    iso = contest.get("rule") == "iso_accuracy" and contest.get("val_reference")
    lines = ["", "## The champion, chosen on val", "",
             f"Mean val utility (correct − λ·energy normalized with `{contest['energy_norm']}`) over the trained "
             f"λ grid {contest['lambdas']}, on {contest['n_val_queries']} val queries; test is never read. "
             + (iso_rule_text(contest) if iso else utility_rule_text(contest)), "",
             "| contender | family | checkpoint | mean val utility | gap to the best (95% CI) | "
             "val iso-accuracy energy share |", "|---|---|---|---:|---|---:|"]
    for row in contest["contenders"]:
        share, ci = row.get("iso_share_val"), row.get("utility_gap_ci95")
        gap = "best" if row.get("utility_gap") is None or row["name"] == _best(contest) else (
            f"{row['utility_gap']:+.4f}" + (f" [{ci[0]:+.4f}, {ci[1]:+.4f}]" if ci else ""))
        lines.append(f"| {row['name']} | {row['family']} | {row['checkpoint']} | {row['val_utility']:.4f} | {gap} | "
                     + ("n/a" if share is None else f"{share:.1%}") + " |")
    lines += knn_evidence_lines(contest.get("knn_evidence"))
    if contest.get("registered_model"):
        lines += ["", f"Registered in MLflow as `{contest['registered_model']}`, alias `{contest['alias']}`, with "
                      "these val figures as tags: `jouleroute serve` serves it unless `gateway.router` is set."]
    return lines


def _best(contest: dict) -> str:
    """The contender with the best mean val utility (older selections: the first listed)."""
    return (contest.get("best_on_utility") or {}).get("name") or contest["contenders"][0]["name"]


def utility_rule_text(contest: dict) -> str:
    """``evaluate.champion_by: utility``: the best mean val utility is deployed; its margin and that margin's CI."""
    win = contest["winner"]
    text = (f"Rule `evaluate.champion_by: utility`: the best mean val utility is deployed. Champion: "
            f"**{win['name']}**, {win['val_utility']:.4f}"
            + (f"; against the runner-up {contest['runner_up']}, {contest['margin']:+.4f}"
               if contest.get("runner_up") else "")
            + (f" and of the best other family ({contest['best_other_family']}) by "
               f"{contest['margin_over_other_family']:+.4f}"
               if contest.get("best_other_family") and contest["best_other_family"] != contest.get("runner_up")
               else "") + ".")
    ci_line = champion_ci_line(contest)
    return text + (f" {ci_line}" if ci_line else "")


def iso_rule_text(contest: dict) -> str:
    """``evaluate.champion_by: iso_accuracy``: which contenders are tied with the best mean val utility (paired CI
    of the gap holds 0), and which of them keeps the best single model's val accuracy for the least energy."""
    ref, win, n = contest["val_reference"], contest["winner"], contest["n_val_queries"]
    tied = contest.get("tied_on_utility") or [win["name"]]
    best = _best(contest)
    shares = {row["name"]: row.get("iso_share_val") for row in contest["contenders"]}
    pct = lambda name: "n/a" if shares.get(name) is None else f"{shares[name]:.1%}"  # noqa: E731
    others = [name for name in tied if name != win["name"]]
    best_utility = (contest.get("best_on_utility") or {}).get("val_utility", win["val_utility"])
    text = (f"The best mean val utility is {best}'s, {best_utility:.4f}"
            + (f"; tied with it (the 95% paired-bootstrap interval of the gap over the {n} val queries holds 0): "
               f"{', '.join(name for name in tied if name != best)}" if len(tied) > 1 else
               ", ahead of every other contender beyond the resampling noise") + ". ")
    text += (f"Rule `evaluate.champion_by: iso_accuracy`: among "
             + ("these" if len(tied) > 1 else "the tied contenders (here only itself)")
             + f", the one whose cheapest val point keeps the best single model's val accuracy ({ref['candidate']}, "
             f"{ref['accuracy']:.3f} at {ref['j_per_query']:.4g} J/query) within {contest['accuracy_tolerance']:g} "
             f"for the least energy. Champion: **{win['name']}** (family `{win['family']}`), at {pct(win['name'])} of "
             "that model's energy on val"
             + (" (" + ", ".join(f"{name} {pct(name)}" for name in others) + ")" if others else "") + ".")
    return text


def champion_ci_line(contest: dict) -> str:
    """The margin's paired-bootstrap CI, and when it contains 0 that the choice is a tie and what the tie rule picks;
    "" when there is no runner-up or no per-query figures to resample."""
    ci = contest.get("margin_ci95")
    if not contest.get("runner_up") or ci is None:
        return ""
    win, n = contest["winner"]["name"], contest["n_val_queries"]
    text = (f"The margin over {contest['runner_up']}, {contest['margin']:+.4f}, has a 95% paired-bootstrap "
            f"interval of [{ci[0]:+.4f}, {ci[1]:+.4f}] over the {n} val queries")
    if contest.get("margin_is_tie"):
        return (text + f": **a tie**. The val split cannot tell {win} and {contest['runner_up']} apart; the tie "
                f"rule ({contest.get('tie_rule', 'the higher mean val utility')}) picks **{win}** "
                f"(family `{contest['winner']['family']}`).")
    return text + f": {win} is ahead beyond the resampling noise."


def knn_evidence_lines(evidence: dict | None) -> list[str]:
    """How much of kNN's neighbour evidence the LM router uses (chosen on val), and what each choice scored."""
    if not evidence:
        return []
    chosen = ("none: the LM router alone" if evidence["plain"] else
              f"weight {evidence['weight']:g} on kNN's merit, energy estimate from "
              + ("the LM (task means)" if evidence["energy"] == "first" else "kNN (neighbour energy)"))
    cross = evidence["cross_fitted"]["val_utility"]
    why = (f" The best blend on all of val was `{evidence['best_in_sample']}`; choosing it on one half of val and "
           f"scoring it on the other gave {cross:.4f} against {evidence['val_utility_alone']:.4f} for the LM router "
           "alone, so " + ("it is used (and that cross-fitted figure is the one it brings to the contest)."
                           if not evidence["plain"] else "the LM router is used alone.")
           if cross is not None and evidence.get("best_in_sample", "0/first") != "0/first" else "")
    lines = ["", f"kNN evidence in the LM router, chosen on val: **{chosen}**.{why} Mean val utility of each blend "
                 "tried (weight/energy; `0/first` is the LM router alone):", "", "| blend | mean val utility |",
             "|---|---:|"]
    lines += [f"| {key} | {value:.4f} |" for key, value in evidence["val_utility"].items()]
    return lines
