"""The results page's account of the labels that trained the policy, when they are not gold (report["labels"])."""

from __future__ import annotations

from jouleroute.evaluation.formatting import fmt


def labels_lines(labels: dict | None) -> list[str]:
    """Which labels trained the policy, what they left out, their agreement with gold per task, and what the
    test split was scored on; nothing for gold labels."""
    if not labels or labels.get("source") == "gold" and not labels.get("feedback"):
        return []
    scored = ("**gold** answers (the labels chose the policy; gold only scores it)"
              if labels["test_scored_on"] == "gold" else "the **labels** (no gold answers exist)")
    lines = ["## Labels without gold", "",
             f"The policy was trained and chosen on labels `{labels['source_label']}`: {labels['labelled_queries']} "
             f"of {labels['queries']} queries labelled ({fmt(100 * labels['coverage'])}%), the rest left out "
             f"({_reasons(labels.get('unlabelled_by_reason') or {})}). The test split is scored on {scored}."]
    if labels.get("reference_correct_by_definition"):
        lines += ["", f"Note: {labels['reference_correct_by_definition']}."]
    quality = labels.get("quality")
    if quality:
        lines += ["", "Labels against gold (rows both hold; 95% CIs resample queries):", "",
                  "| task | rows | precision of 'correct' | recall of 'correct' | agreement |", "|---|---|---|---|---|"]
        for task, q in [*quality["by_task"].items(), ("**all**", quality["overall"])]:
            lines.append(f"| {task} | {q['labelled_rows']} | {_ci(q, 'precision')} | {_ci(q, 'recall')} "
                         f"| {_ci(q, 'agreement')} |")
    return lines + [""]


def _ci(q: dict, name: str) -> str:
    value, ci = q.get(name), q.get(f"{name}_ci")
    if value is None:
        return "n/a"
    return f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def _reasons(reasons: dict) -> str:
    return ", ".join(f"{reason.replace('_', ' ')}: {n}" for reason, n in reasons.items()) or "none"
