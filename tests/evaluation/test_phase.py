"""Phase-transition detector on synthetic curves with a known lambda*."""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.evaluation.phase import combined_transition, detect_transition, expensive_candidates

GRID = np.logspace(-3, 1, 9)  # half-decade steps, as in the default params
STEP = 0.5  # log10 spacing of GRID


def logistic(log_lam: np.ndarray, center: float, scale: float) -> np.ndarray:
    """Falls from 0.9 to 0.3 around log10(lambda) = center."""
    return 0.3 + 0.6 / (1 + np.exp((log_lam - center) / scale))


@pytest.mark.parametrize("true_log", [-1.75, -1.1, 0.2])
def test_step_is_located_within_half_a_grid_step(true_log):
    y = np.where(np.log10(GRID) < true_log, 0.85, 0.35)
    t = detect_transition(GRID, y, min_change=0.05)
    assert t.found and t.total_change == pytest.approx(-0.5)
    assert abs(t.log10_lambda_star - true_log) <= STEP / 2 + 1e-9
    assert not t.resolved  # a step is sharper than the sweep can resolve
    assert t.width_log10 == pytest.approx(0.8 * STEP)


def test_smooth_logistic_center_and_width():
    center, scale = -1.25, 0.3  # center on a midpoint of the grid
    t = detect_transition(GRID, logistic(np.log10(GRID), center, scale), min_change=0.05)
    assert t.log10_lambda_star == pytest.approx(center)
    assert t.resolved
    # A dense sweep recovers the analytic 10%-90% width 2 * scale * ln 9 (endpoints ~saturated).
    dense = np.logspace(-4, 2, 241)
    t_dense = detect_transition(dense, logistic(np.log10(dense), -1.1, scale), min_change=0.05)
    assert t_dense.log10_lambda_star == pytest.approx(-1.1, abs=0.02)
    assert t_dense.width_log10 == pytest.approx(2 * scale * np.log(9), rel=0.03)
    assert np.log10(t_dense.lambda_half) == pytest.approx(-1.1, abs=0.01)


def test_flat_curve_has_no_transition():
    t = detect_transition(GRID, np.full(len(GRID), 0.6) + 0.01 * np.sin(np.arange(len(GRID))), 0.05)
    assert not t.found and t.lambda_star is None


def test_order_of_the_sweep_does_not_matter():
    y = logistic(np.log10(GRID), -0.75, 0.2)
    perm = np.random.default_rng(0).permutation(len(GRID))
    assert detect_transition(GRID[perm], y[perm], 0.05) == detect_transition(GRID, y, 0.05)


def test_combined_transition_averages_curves_of_opposite_direction():
    x = np.log10(GRID)
    acc = logistic(x, -1.25, 0.2)  # falls
    share = 1 - logistic(x, -1.25, 0.2)  # also moves at the same lambda, in the other direction
    t = combined_transition(GRID, [acc, share, np.full(len(GRID), 0.4)], 0.05)  # flat curve ignored
    assert t.log10_lambda_star == pytest.approx(-1.25)


def test_expensive_rules():
    j = {"s": 1.0, "m": 4.0, "l": 12.0, "xl": 30.0}
    assert expensive_candidates(j, "above_median") == ["l", "xl"]
    assert expensive_candidates(j, "top") == ["xl"]
    assert expensive_candidates({"s": 1.0, "l": 2.0}, "above_median") == ["l"]
    with pytest.raises(ValueError, match="valid: above_median, top"):
        expensive_candidates(j, "costly")


def test_lambda_star_per_task_locates_each_tasks_own_transition(tmp_path):
    """Task a leaves the dear candidate between λ 0.1 and 0.2, task b between 1 and 2: each task's λ* is the
    geometric midpoint of its own step, the family's is one of them, and the figure is drawn."""
    from jouleroute.evaluation import EvaluateConfig, RouterRun, run_evaluate
    from jouleroute.routing.base import RoutingDecisions

    from .conftest import profile_rows, queries_frame

    ids = [f"{t}/{i}" for t in "ab" for i in range(10)]
    tasks = [q.split("/")[0] for q in ids]
    profile = profile_rows(ids, tasks, ["test"] * 20, {"cheap": [0] * 20, "dear": [1] * 20},
                           {"cheap": [1.0] * 20, "dear": [10.0] * 20})
    lams = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)
    switch = {"a": 0.15, "b": 1.5}
    runs = [RouterRun(f"f:{lam:g}", "f", lam, RoutingDecisions(ids, ["dear" if lam < switch[t] else "cheap"
                                                                      for t in tasks])) for lam in lams]
    result = run_evaluate(profile, queries_frame(ids, tasks, ["test"] * 20), runs,
                          EvaluateConfig(lambdas=lams, bootstrap_samples=0), tmp_path)
    per = result.metrics["families"]["f"]["lambda_star_per_task"]
    assert per["a"] == pytest.approx((0.1 * 0.2) ** 0.5) and per["b"] == pytest.approx((1.0 * 2.0) ** 0.5)
    assert (tmp_path / "plots" / "lambda_star_by_task.png").stat().st_size > 0
    assert "λ* per task" in (tmp_path / "report.md").read_text()
