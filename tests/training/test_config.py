"""Typed params: typos, unknown rewards and λ grids that do not fit together fail at load time."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from jouleroute.config import ParamsError, load_params
from jouleroute.routing.lm.config import RouterConfig
from jouleroute.training.config import GrpoConfig, RouterDataConfig, SftConfig


def test_defaults_load_and_are_cpu_safe():
    assert SftConfig().precision == "auto" and RouterConfig().overhead_split == "tokens"
    assert GrpoConfig().lambdas is None and GrpoConfig().beta == 0.0  # GRPO samples the trained grid


@pytest.mark.parametrize("model, bad", [
    (RouterDataConfig, {"lambda": [0.1]}),
    (SftConfig, {"epoch": 2}),
    (GrpoConfig, {"num_generation": 4}),
    (RouterConfig, {"batchsize": 4}),
])
def test_unknown_keys_are_rejected(model, bad):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        model(**bad)


def test_unknown_reward_name_lists_valid_ones():
    with pytest.raises(ValidationError, match="valid: correctness, energy_penalty, expected_correctness, format"):
        GrpoConfig(rewards={"correctness": 1.0, "brevity": 1.0})


@pytest.mark.parametrize("grid", [[], [-0.1, 0.5], [0.5, 0.5]])
def test_bad_lambda_grids(grid):
    with pytest.raises(ValidationError):
        RouterDataConfig(lambdas=grid)
    with pytest.raises(ValidationError):
        GrpoConfig(lambdas=grid)


def test_lambda_grid_from_yaml_list_becomes_a_tuple():
    assert RouterDataConfig(lambdas=[0, 1]).lambdas == (0.0, 1.0)


def _params(tmp_path, **sections):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(sections))
    return path


@pytest.mark.parametrize("sections, name", [
    ({"evaluate": {"lambdas": [0.1, 0.2, 0.5, 1, 2, 5, 10]}}, "evaluate.lambdas"),
    ({"grpo": {"lambdas": [0.0, 4.0]}}, "grpo.lambdas"),
    ({"router": {"lam": 3.0}}, "router.lam"),
])
def test_params_refuse_lambdas_outside_the_trained_range(tmp_path, sections, name):
    with pytest.raises(ParamsError, match=f"{name}.*outside the router's trained range"):
        load_params(_params(tmp_path, router_data={"lambdas": [0, 0.5, 2]}, **sections))


def test_params_accept_grids_inside_the_trained_range(tmp_path):
    params = load_params(_params(tmp_path, router_data={"lambdas": [0, 1, 4]},
                                 evaluate={"lambdas": [0.1, 0.2, 0.5, 1, 2, 3, 4]}, grpo={"lambdas": [0, 4]}))
    assert params.evaluate.lambdas[-1] == 4


def test_router_data_labels_that_collide_are_refused(tmp_path):
    from jouleroute.routing.lm.spec import RouterSpec

    with pytest.raises(ValueError, match="share the label"):
        RouterSpec(candidates=["a", "b"], labels=["X", "X"], energy_source="estimated", energy_norm="max",
                   label_policy="utility", lambdas=[0, 1], utility_scale=10.0, max_query_tokens=32,
                   task_energy_j={}, pool_energy_j={"a": 1.0, "b": 2.0})
