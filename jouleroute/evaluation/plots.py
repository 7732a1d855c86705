"""PNG plots of an evaluation (matplotlib's object API with the Agg canvas: no pyplot, no display).

Every energy axis names its energy_source, so a figure lifted out of the report
still says whether its joules were measured, estimated or modelled.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from jouleroute.evaluation.frontier import nondecreasing_hull


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _log_axis_if_wide(ax, values: list[float]) -> None:
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:  # orders of magnitude apart: linear hides the small ones
        ax.set_xscale("log")


def plot_accuracy_vs_energy(points: dict, frontier: set[tuple[str, str]], energy_label: str, path: Path) -> Path:
    """``points``: {"singles": {name: (J, acc)}, "oracle": (J, acc), "routers": {name: (J, acc, family, lam)},
    "cascade": [(J, acc)] (optional: the cascade's frontier chains on test), "deployed": (J, acc, what) (optional: the
    deployed policy, whatever its kind)};
    ``frontier``: {("single" | "router", name)} of the points on the Pareto frontier."""
    fig = Figure(figsize=(8, 5.5))
    ax = fig.add_subplot()
    singles, routers = points["singles"], points["routers"]
    all_xy = list(singles.values()) + [r[:2] for r in routers.values()]
    for name, (e, a) in singles.items():
        ax.scatter(e, a, marker="s", color="0.35", zorder=3)
        ax.annotate(name, (e, a), textcoords="offset points", xytext=(4, -10), fontsize=7, color="0.25")
    families = sorted({r[2] for r in routers.values()})
    colors = {f: c for f, c in zip(families, [f"C{i}" for i in range(10)] * 10)}
    for fam in families:
        members = sorted(((r[3] or 0.0, n, r) for n, r in routers.items() if r[2] == fam))
        xs, ys = [m[2][0] for m in members], [m[2][1] for m in members]
        swept = any(m[2][3] is not None for m in members)
        ax.plot(xs, ys, marker="o", linestyle="-" if swept else "none", color=colors[fam], label=fam, zorder=4)
        if not swept:
            for _, n, r in members:
                ax.annotate(n, r[:2], textcoords="offset points", xytext=(4, 4), fontsize=7, color=colors[fam])
    cascade = sorted(points.get("cascade") or [])
    if cascade:  # the chains of the selection frontier, each on test (evaluation/cascades.py)
        ax.plot(*zip(*cascade), marker="^", linestyle="-", color="C9", label="cascade (chosen on selection)", zorder=4)
        all_xy += cascade
    oe, oa = points["oracle"]
    ax.scatter(oe, oa, marker="*", s=180, color="gold", edgecolor="k", label="oracle", zorder=5)
    if points.get("deployed"):  # the deployed policy, whatever its kind, scored once on test
        de, da, served = points["deployed"]
        ax.scatter(de, da, marker="D", s=90, facecolor="none", edgecolor="crimson", linewidth=1.8,
                   label=f"deployed: {served}"[:60], zorder=6)
    front = [xy for n, xy in singles.items() if ("single", n) in frontier]
    front += [r[:2] for n, r in routers.items() if ("router", n) in frontier]
    if front:
        fx, fy = zip(*sorted(front))
        ax.step(fx, fy, where="post", color="k", linewidth=0.8, linestyle=":", label="Pareto frontier")
    xy = np.asarray(all_xy, float)
    hull = nondecreasing_hull(xy[:, 0], xy[:, 1])
    ax.plot(hull[:, 0], hull[:, 1], color="0.6", linewidth=0.8, linestyle="--", label="convex hull (AIQ)")
    _log_axis_if_wide(ax, [p[0] for p in all_xy] + [oe])
    ax.set_xlabel(f"energy per query [J, {energy_label}]")
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy vs energy per query")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_lambda_sweep(sweep: dict[str, dict], energy_label: str, path: Path) -> Path:
    """``sweep``: {family: {"lam": [...], "accuracy": [...], "j_per_query": [...], "expensive_share": [...],
    "lambda_star": float | None}}; one panel per quantity, lambda* dashed."""
    fig = Figure(figsize=(12, 4))
    panels = [("accuracy", "accuracy"), ("j_per_query", f"J/query [{energy_label}]"),
              ("expensive_share", "share routed to expensive candidates")]
    for k, (key, label) in enumerate(panels):
        ax = fig.add_subplot(1, 3, k + 1)
        for i, (fam, s) in enumerate(sorted(sweep.items())):
            ax.plot(s["lam"], s[key], marker="o", color=f"C{i % 10}", label=fam)
            if s.get("lambda_star"):
                ax.axvline(s["lambda_star"], color=f"C{i % 10}", linestyle="--", linewidth=1)
                ax.annotate(f"λ*={s['lambda_star']:.3g}", (s["lambda_star"], 0.97 - 0.07 * i),
                            xycoords=("data", "axes fraction"), xytext=(3, 0), textcoords="offset points",
                            fontsize=7, color=f"C{i % 10}")
        ax.set_xscale("log")
        ax.set_xlabel("lambda (energy penalty)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if k == 0:
            ax.legend(fontsize=7, title="dashed: lambda*", title_fontsize=7)
    return _save(fig, path)


def plot_lambda_star_by_task(stars: dict[str, dict[str, float | None]], lambdas: list[float] | None,
                             path: Path) -> Path:
    """λ* of every family on every task (the phase transition across tasks); a task where a family shows no
    transition is drawn as an open marker at the bottom of the grid."""
    tasks = sorted({t for per in stars.values() for t in per})
    fig = Figure(figsize=(max(6.0, 0.6 * len(tasks) + 3), 4.5))
    ax = fig.add_subplot()
    floor = min(lambdas) if lambdas else min([v for per in stars.values() for v in per.values() if v] or [1e-3])
    for i, (fam, per) in enumerate(sorted(stars.items())):
        x = np.arange(len(tasks)) + (i - (len(stars) - 1) / 2) * 0.08
        found = [(xi, per.get(t)) for xi, t in zip(x, tasks) if per.get(t)]
        none = [xi for xi, t in zip(x, tasks) if not per.get(t)]
        if found:
            ax.scatter(*zip(*found), color=f"C{i % 10}", label=fam, zorder=3)
        if none:
            ax.scatter(none, [floor] * len(none), facecolors="none", edgecolors=f"C{i % 10}", zorder=3,
                       label=None if found else f"{fam} (no transition)")
    ax.set_yscale("log")
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels(tasks, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("lambda* (combined transition)")
    ax.set_title("Phase transition per task (open: no transition on the grid)", fontsize=9)
    ax.grid(alpha=0.3)
    if stars:
        ax.legend(fontsize=7)
    return _save(fig, path)


def plot_candidates(summary: dict[str, dict], energy_label: str, path: Path) -> Path:
    """The tournament's accuracy-energy scatter: one point per candidate (``profile_summary`` figures)."""
    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.add_subplot()
    for i, (name, s) in enumerate(sorted(summary.items())):
        ax.scatter(s["energy_j_mean"], s["accuracy"], color=f"C{i % 10}", zorder=3)
        ax.annotate(name, (s["energy_j_mean"], s["accuracy"]), textcoords="offset points", xytext=(4, 4),
                    fontsize=7)
    _log_axis_if_wide(ax, [s["energy_j_mean"] for s in summary.values()])
    ax.set_xlabel(f"mean energy per query [J, {energy_label}]")
    ax.set_ylabel("accuracy")
    ax.set_title("Tournament: accuracy vs energy per candidate")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_routing_mix(family: str, mixes: dict[str, dict[str, dict[str, float]]], candidates: list[str],
                     path: Path) -> Path:
    """One heatmap per router of the family: rows tasks, columns candidates, cells the share of queries.

    ``mixes``: {router name: {task: {candidate: share}}}.
    """
    names = list(mixes)
    cols = min(3, len(names))
    rows = int(np.ceil(len(names) / cols))
    tasks = sorted({t for m in mixes.values() for t in m})
    # Constrained layout keeps tick labels, titles and the shared colorbar from overlapping.
    fig = Figure(figsize=(4.2 * cols + 1, (0.4 * len(tasks) + 1.9) * rows + 0.5), layout="constrained")
    for k, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, k + 1)
        grid = np.array([[mixes[name].get(t, {}).get(c, 0.0) for c in candidates] for t in tasks])
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(candidates)), candidates, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(tasks)), tasks, fontsize=7)
        for (r, c), v in np.ndenumerate(grid):
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w" if v < 0.6 else "k")
        ax.set_title(name, fontsize=8)
    fig.colorbar(image, ax=fig.axes, shrink=0.8, label="share of the task's queries")
    fig.suptitle(f"Routing mix per task: {family} (candidates cheapest first)", fontsize=10)
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=110)
    return path
