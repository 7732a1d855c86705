"""Typed params: typos, impossible batch shapes and unknown rewards fail at load time."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jouleroute.training.config import GrpoConfig, RouterConfig, RouterDataConfig, SftConfig


def test_defaults_load_and_are_cpu_safe():
    grpo = GrpoConfig()
    assert (grpo.batch_size * grpo.grad_accum) % grpo.num_generations == 0
    assert SftConfig().precision == "auto" and RouterConfig().overhead_split == "tokens"
    assert RouterDataConfig().lambdas == GrpoConfig().lambdas


@pytest.mark.parametrize("model, bad", [
    (RouterDataConfig, {"lambda": [0.1]}),
    (SftConfig, {"epoch": 2}),
    (GrpoConfig, {"num_generation": 4}),
    (RouterConfig, {"batchsize": 4}),
])
def test_unknown_keys_are_rejected(model, bad):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model(**bad)


def test_grpo_batch_must_divide_into_groups():
    with pytest.raises(ValidationError, match="divisible by num_generations"):
        GrpoConfig(batch_size=6, num_generations=4)


def test_unknown_reward_name_lists_valid_ones():
    with pytest.raises(ValidationError, match="valid: correctness, energy_penalty, format"):
        GrpoConfig(rewards={"correctness": 1.0, "brevity": 1.0})


@pytest.mark.parametrize("grid", [[], [-0.1, 0.5], [0.5, 0.5]])
def test_bad_lambda_grids(grid):
    with pytest.raises(ValidationError):
        RouterDataConfig(lambdas=grid)
    with pytest.raises(ValidationError):
        GrpoConfig(lambdas=grid)


def test_lambda_grid_from_yaml_list_becomes_a_tuple():
    assert RouterDataConfig(lambdas=[0, 1]).lambdas == (0.0, 1.0)
