"""The paired bootstrap of the energy-AIQ difference (evaluation/bootstrap.py), on data whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from jouleroute.evaluation import EvaluateConfig, RouterRun
from jouleroute.evaluation.bootstrap import paired_aiq_difference, resample_counts
from jouleroute.evaluation.outcomes import build_matrix
from jouleroute.evaluation.report import comparison_lines
from jouleroute.evaluation.run import evaluate_outcomes
from jouleroute.routing.base import RoutingDecisions
from tests.evaluation.conftest import utility_router

N, SAMPLES = 400, 2000


def _known_case(seed: int = 5):
    """Two singles that are never right, at 1 J and 2 J on every query; each family answers at 2 J with its
    own 0/1 outcomes x (lm) and y (knn) at every λ. The frontier is then the line from (1 J, 0) to
    (2 J, mean), so AIQ = mean / 2 on the full sample and on every resample: AIQ(lm) − AIQ(knn) is the
    mean of d = (x − y) / 2 over the resampled queries."""
    rng = np.random.default_rng(seed)
    x = (rng.uniform(size=N) < 0.7).astype(float)
    y = (rng.uniform(size=N) < 0.6).astype(float)
    singles_correct = np.zeros((N, 2))
    singles_energy = np.tile([1.0, 2.0], (N, 1))
    lams = 3
    fams = {"lm": (np.repeat(x[:, None], lams, 1), np.full((N, lams), 2.0)),
            "knn": (np.repeat(y[:, None], lams, 1), np.full((N, lams), 2.0))}
    return singles_correct, singles_energy, fams, (x - y) / 2


def test_a_known_paired_difference_gives_the_direct_bootstrap_interval():
    singles_correct, singles_energy, fams, d = _known_case()
    out = paired_aiq_difference(singles_correct, singles_energy, fams, "lm", SAMPLES, 0.95, seed=3)
    row = out["families"]["knn"]
    assert row["difference"] == pytest.approx(d.mean(), abs=1e-12)
    assert row["reference_aiq"] == pytest.approx(fams["lm"][0][:, 0].mean() / 2, abs=1e-12)
    # the same draws, computed directly on d: the documented resampling (rng.integers(0, Q, (samples, Q)))
    idx = np.random.default_rng(3).integers(0, N, size=(SAMPLES, N))
    direct = np.percentile(d[idx].mean(axis=1), [2.5, 97.5])
    assert [row["ci_low"], row["ci_high"]] == pytest.approx(list(direct), abs=1e-12)
    # and the normal approximation of a mean: d̄ ± 1.96 s/√n, to a tenth of the interval's width
    half = 1.96 * d.std(ddof=1) / np.sqrt(N)
    assert row["ci_low"] == pytest.approx(d.mean() - half, abs=0.1 * half)
    assert row["ci_high"] == pytest.approx(d.mean() + half, abs=0.1 * half)
    assert row["verdict"] == ("win" if row["ci_low"] > 0 else "tie")


def test_the_same_seed_gives_the_same_interval_and_another_seed_moves_it():
    singles_correct, singles_energy, fams, _ = _known_case()
    run = lambda seed: paired_aiq_difference(singles_correct, singles_energy, fams, "lm", 300, 0.95, seed)
    assert run(11) == run(11)
    assert run(11)["families"]["knn"]["ci_low"] != run(12)["families"]["knn"]["ci_low"]


def test_verdicts_tie_win_and_loss():
    singles_correct, singles_energy, fams, _ = _known_case()
    same = {"lm": fams["lm"], "copy": fams["lm"]}
    assert paired_aiq_difference(singles_correct, singles_energy, same, samples=200)["families"]["copy"] == \
        pytest.approx({"aiq": fams["lm"][0][:, 0].mean() / 2, "reference_aiq": fams["lm"][0][:, 0].mean() / 2,
                       "difference": 0.0, "ci_low": 0.0, "ci_high": 0.0, "verdict": "tie"})
    ones, zeros = np.ones((N, 3)), np.zeros((N, 3))
    energy = np.full((N, 3), 2.0)
    split = {"lm": (ones, energy), "worse": (zeros, energy)}
    assert paired_aiq_difference(singles_correct, singles_energy, split, samples=200)["families"]["worse"][
        "verdict"] == "win"
    flipped = {"lm": (zeros, energy), "better": (ones, energy)}
    assert paired_aiq_difference(singles_correct, singles_energy, flipped, samples=200)["families"]["better"][
        "verdict"] == "loss"


def test_resample_counts_draw_every_resample_with_replacement():
    counts = resample_counts(50, 7, seed=1)
    assert counts.shape == (7, 50) and (counts.sum(axis=1) == 50).all()
    idx = np.random.default_rng(1).integers(0, 50, size=(7, 50))
    assert (counts[2] == np.bincount(idx[2], minlength=50)).all()


def test_evaluate_reports_the_difference_of_the_families_aiq(synthetic):
    """In the evaluation, the point estimate is exactly the reported AIQ difference of the two families."""
    cfg = EvaluateConfig(bootstrap_samples=100)
    runs = []
    for fam, noise in (("lm", 0.05), ("knn", 0.3)):
        for lam in cfg.lambdas:
            d = utility_router(synthetic, lam, noise=noise)
            runs.append(RouterRun(f"{fam}:{lam:g}", fam, lam, RoutingDecisions(d.query_ids, d.candidate_ids)))
    matrix = build_matrix(synthetic["profile"], synthetic["queries"], "test", "energy_j")
    report = evaluate_outcomes(matrix, runs, cfg)
    block = report["aiq_difference"]
    aiq = {f: report["families"][f]["views"][report["headline_view"]]["aiq"] for f in ("lm", "knn")}
    assert block["families"]["knn"]["difference"] == pytest.approx(aiq["lm"] - aiq["knn"], abs=1e-12)
    assert block["families"]["knn"]["ci_low"] <= block["families"]["knn"]["difference"] <= \
        block["families"]["knn"]["ci_high"]
    assert block["samples"] == 100 and block["view"] == report["headline_view"]
    assert "aiq_difference" not in evaluate_outcomes(matrix, runs, EvaluateConfig(bootstrap_samples=0))
    # the table every report shows: family, AIQ, LM − family, CI, verdict
    row = block["families"]["knn"]
    word = {"tie": "tie", "win": "lm wins", "loss": "lm loses"}[row["verdict"]]
    assert (f"| knn | {row['aiq']:.3f} | {row['difference']:+.4f} | [{row['ci_low']:+.4f}, {row['ci_high']:+.4f}] "
            f"| {word} |") in comparison_lines(block)
