"""Splitting a batch window's energy over its requests; expected values computed by hand."""

from __future__ import annotations

import pytest

from jouleroute.energy import ATTRIBUTION_RULE, Measurement, attribute_window, attribution_rule, token_shares


def test_shares_follow_output_plus_weighted_input_tokens():
    # weights: 10 + 0.1*100 = 20, 30 + 0.1*0 = 30, 0 + 0.1*500 = 50 -> total 100
    assert token_shares([100, 0, 500], [10, 30, 0], prefill_weight=0.1) == pytest.approx([0.2, 0.3, 0.5])


def test_window_energy_and_idle_are_split_by_share():
    window = Measurement(time_s=2.0, energy_j=600.0, source="measured-nvml")
    pairs = attribute_window(window, [100, 0, 500], [10, 30, 0], idle_power_w=100.0, prefill_weight=0.1)
    # idle over the window: 100 W x 2 s = 200 J, so net window energy is 400 J.
    assert pairs == [pytest.approx((120.0, 80.0)), pytest.approx((180.0, 120.0)), pytest.approx((300.0, 200.0))]
    assert sum(p[0] for p in pairs) == pytest.approx(600.0)
    assert sum(p[1] for p in pairs) == pytest.approx(400.0)


def test_zero_prefill_weight_is_pure_output_share_like_ml_energy():
    window = Measurement(time_s=1.0, energy_j=90.0, source="estimated")
    pairs = attribute_window(window, [1000, 1], [1, 2], idle_power_w=0.0, prefill_weight=0.0)
    assert [p[0] for p in pairs] == pytest.approx([30.0, 60.0])


def test_no_tokens_at_all_splits_evenly_and_empty_batch_is_empty():
    assert token_shares([0, 0], [0, 0], 0.1) == [0.5, 0.5]
    assert attribute_window(Measurement(1.0, 5.0, "estimated"), [], [], 0.0) == []


def test_mismatched_or_negative_counts_are_rejected():
    with pytest.raises(ValueError, match="input_tokens has 2"):
        token_shares([1, 2], [3], 0.1)
    with pytest.raises(ValueError, match=">= 0"):
        token_shares([-1], [3], 0.1)


def test_rule_string_names_the_weight():
    assert ATTRIBUTION_RULE == attribution_rule(0.1)
    assert "output_tokens+0.25*input_tokens" in attribution_rule(0.25)
