"""Rewards: hand-computed values on a 3-candidate query, invalid completions included."""

from __future__ import annotations

import json
import math

import pytest

from jouleroute.training.rewards import REWARDS, build_rewards, correctness, energy_penalty, format_reward, get_reward

CORRECT = {"small": 0, "mid": 1, "large": 1}
ENERGY = {"small": 1.0, "mid": 5.0, "large": 20.0}
# valid, valid, not a candidate, valid in TRL's message format with noise around it, empty
COMPLETIONS = ["small", "large", "banana", [{"role": "assistant", "content": " mid.\n"}], ""]
N = len(COMPLETIONS)


def columns(lam: float = 0.5) -> dict:
    return {"correct_by_candidate": [CORRECT] * N, "energy_by_candidate": [ENERGY] * N, "lam": [lam] * N}


def test_correctness_scores_the_named_candidate_and_zero_for_invalid():
    assert correctness(COMPLETIONS, **columns()) == [0.0, 1.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "norm, expected",
    [
        # max: e / 20 -> small 0.05, mid 0.25, large 1; invalid counts as 1
        ("max", [-0.025, -0.5, -0.5, -0.125, -0.5]),
        # linear: (e - 1) / 19 -> small 0, mid 4/19, large 1
        ("linear", [0.0, -0.5, -0.5, -0.5 * 4 / 19, -0.5]),
        # log: (ln e - ln 1) / (ln 20 - ln 1) -> mid ln5/ln20
        ("log", [0.0, -0.5, -0.5, -0.5 * math.log(5) / math.log(20), -0.5]),
    ],
)
def test_energy_penalty_by_normalization(norm, expected):
    got = energy_penalty(COMPLETIONS, energy_norm=norm, **columns(0.5))
    assert got == pytest.approx(expected, abs=1e-12)


def test_energy_penalty_is_zero_at_lambda_zero_and_scales_with_lambda():
    assert energy_penalty(COMPLETIONS, **columns(0.0)) == pytest.approx([0.0] * N)
    assert energy_penalty(["mid"], energy_by_candidate=[ENERGY], lam=[2.0]) == pytest.approx([-0.5])


def test_format_penalizes_anything_but_exactly_one_candidate():
    assert format_reward(COMPLETIONS, **columns()) == [0.0, 0.0, -1.0, 0.0, -1.0]
    assert format_reward(["small mid", "model small", "SMALL"], correct_by_candidate=[CORRECT] * 3) == [-1.0] * 3


def test_json_string_columns_are_accepted():
    cols = {"correct_by_candidate": [json.dumps(CORRECT)], "energy_by_candidate": [json.dumps(ENERGY)], "lam": [1.0]}
    assert correctness(["mid"], **cols) == [1.0]
    assert energy_penalty(["mid"], **cols) == pytest.approx([-0.25])


def test_row_count_mismatch_is_an_error():
    with pytest.raises(ValueError, match="correct_by_candidate"):
        correctness(["small", "mid"], correct_by_candidate=[CORRECT])


def test_unknown_reward_lists_valid_names():
    with pytest.raises(ValueError) as err:
        get_reward("accuracy")
    for name in REWARDS:
        assert name in str(err.value)


def test_build_rewards_keeps_order_names_and_weights():
    funcs, weights = build_rewards({"format": 0.5, "energy_penalty": 2.0}, energy_norm="linear")
    assert [f.__name__ for f in funcs] == ["format", "energy_penalty"]
    assert weights == [0.5, 2.0]
    # the configured normalization reaches energy_penalty: linear gives small exactly 0
    assert funcs[1](["small"], energy_by_candidate=[ENERGY], lam=[1.0], trainer_state=None) == [0.0]


def test_weighted_sum_equals_the_utility_that_defines_sft_labels():
    from jouleroute.routing.scores import normalize_energy_map as normalize_energy

    funcs, weights = build_rewards({"correctness": 1.0, "energy_penalty": 1.0})
    for cid in CORRECT:
        total = sum(w * f([cid], **{k: v[:1] for k, v in columns(0.5).items()})[0] for f, w in zip(funcs, weights))
        assert total == pytest.approx(CORRECT[cid] - 0.5 * normalize_energy(ENERGY, "max")[cid])


def test_expected_correctness_reads_the_shrunk_outcome_of_the_named_candidate():
    from jouleroute.training.rewards import expected_correctness

    table = {"small": 0.25, "mid": 0.6, "large": 0.9}
    got = expected_correctness(COMPLETIONS, expected_correct_by_candidate=[table] * N)
    assert got == [0.25, 0.9, 0.0, 0.6, 0.0]
