"""Per-candidate summary of a profile: accuracy, energy and latency figures, with their source.

Accuracy is over the graded rows only; a row whose query has no gold (``correct`` null) is counted in
``ungraded`` and enters the energy, latency and token figures like any other. A figure with no graded row to
stand on (a profile of a user's prompts alone) is NaN: the table shows ``n/a`` and MLflow gets no metric.
"""

from __future__ import annotations

import math

import pandas as pd


def summarize_profile(profile: pd.DataFrame) -> dict[str, dict[str, float | str]]:
    """``{candidate_id: {metric: value}}``; energy figures carry ``energy_source``."""
    out: dict[str, dict[str, float | str]] = {}
    for cand, rows in profile.groupby("candidate_id", sort=True):
        graded = rows[rows["correct"].notna()]
        n_correct = float(graded["correct"].sum())
        stats: dict[str, float | str] = {
            "queries": float(len(rows)),
            "graded": float(len(graded)),
            "ungraded": float(len(rows) - len(graded)),
            "accuracy": _mean(graded["correct"]),
            "invalid_rate": float(rows["invalid"].mean()),
            "energy_j_mean": float(rows["energy_j"].mean()),
            "energy_j_p95": float(rows["energy_j"].quantile(0.95)),
            "energy_net_j_mean": float(rows["energy_net_j"].mean()),
            # the joules of the graded rows per correct answer among them
            "j_per_correct": (float(graded["energy_j"].sum() / n_correct) if n_correct else
                              math.inf if len(graded) else math.nan),
            "latency_s_p50": float(rows["latency_s"].quantile(0.5)),
            "latency_s_p95": float(rows["latency_s"].quantile(0.95)),
            "output_tokens_mean": float(rows["output_tokens"].mean()),
            "energy_source": ",".join(sorted(rows["energy_source"].unique())),
        }
        for task, task_rows in rows.groupby("task", sort=True):
            stats[f"accuracy.{task}"] = _mean(task_rows["correct"].dropna())
            stats[f"energy_j_mean.{task}"] = float(task_rows["energy_j"].mean())
        out[str(cand)] = stats
    return out


def _mean(values: pd.Series) -> float:
    return float(values.mean()) if len(values) else math.nan


def summary_table(summary: dict[str, dict[str, float | str]]) -> str:
    """A markdown table of the headline figures, for humans and MLflow artifacts."""
    head = ("| candidate | accuracy | ungraded | J/query (mean) | J/query (p95) | J/correct | latency p50 s | "
            "energy source |")
    lines = [head, "|" + "---|" * 8]
    for cand, s in summary.items():
        accuracy = "n/a" if math.isnan(s["accuracy"]) else f"{s['accuracy']:.3f}"
        per_correct = "n/a" if math.isnan(s["j_per_correct"]) else f"{s['j_per_correct']:.3g}"
        lines.append(
            f"| {cand} | {accuracy} | {s['ungraded']:.0f} | {s['energy_j_mean']:.3g} | "
            f"{s['energy_j_p95']:.3g} | {per_correct} | {s['latency_s_p50']:.3g} | {s['energy_source']} |"
        )
    return "\n".join(lines)


def summary_metrics(summary: dict) -> dict[str, float]:
    """The summary's finite numbers as MLflow metrics, named ``<candidate>.<key>`` as in summary.json."""
    return {f"{cand}.{key}": value for cand, stats in summary.items() for key, value in stats.items()
            if isinstance(value, float) and math.isfinite(value)}
