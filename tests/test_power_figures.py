"""scripts/power_figures.py: the chance that a test split shows a policy non-inferior (docs/metrics.md)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from power_figures import chance_noninferior, paired_sd, queries_needed  # noqa: E402


def test_sd_from_interval_round_trips():
    """An interval built from a known sd gives it back."""
    sd, n = 0.3, 1400
    half = 1.959964 * sd / np.sqrt(n)
    assert paired_sd(-0.01 - half, -0.01 + half, n, 0.95) == pytest.approx(sd, rel=1e-4)


def test_chance_matches_a_simulation():
    """The normal formula agrees with simulated paired tests: n queries, true difference d, verdict by the lower
    end of the 95% normal interval against -margin."""
    rng = np.random.default_rng(0)
    n, margin, d = 620, 0.03, -0.009
    # per-query differences in {-1, 0, 1}: disagreement 12%, mean d
    p_up, p_down = (0.12 + d) / 2, (0.12 - d) / 2
    draws = rng.choice([1, -1, 0], p=[p_up, p_down, 1 - p_up - p_down], size=(4000, n))
    means, ses = draws.mean(1), draws.std(1, ddof=1) / np.sqrt(n)
    simulated = float(np.mean(means - 1.959964 * ses > -margin))
    sd = float(np.sqrt(0.12 - d ** 2))
    assert chance_noninferior(d, sd, n, margin, 0.95) == pytest.approx(simulated, abs=0.03)


def test_more_queries_more_chance_and_the_80_percent_size():
    sd, margin, d = 0.337, 0.03, -0.009
    assert chance_noninferior(d, sd, 620, margin, 0.95) < chance_noninferior(d, sd, 2000, margin, 0.95)
    needed = queries_needed(d, sd, margin, 0.95)
    assert chance_noninferior(d, sd, needed, margin, 0.95) == pytest.approx(0.8, abs=0.002)
    assert chance_noninferior(d, sd, needed - 50, margin, 0.95) < 0.8


def test_at_or_below_the_margin_is_never():
    assert queries_needed(-0.03, 0.3, 0.03, 0.95) is None
    assert chance_noninferior(-0.04, 0.3, 10_000, 0.03, 0.95) < 0.01
    assert chance_noninferior(0.0, 0.0, 10, 0.03, 0.95) == 1.0
