"""The labels and prompts sections are strict: unknown keys and inconsistent choices are errors."""

from __future__ import annotations

import pydantic
import pytest

from jouleroute.labels.config import LabelsConfig, PromptsConfig


def test_unknown_keys_are_rejected():
    with pytest.raises(pydantic.ValidationError, match="refrence"):
        LabelsConfig.model_validate({"source": "vote", "refrence": "big"})
    with pytest.raises(pydantic.ValidationError, match="prompt_col"):
        PromptsConfig.model_validate({"prompt_col": "text"})


def test_a_reference_is_named_exactly_when_it_is_the_source():
    with pytest.raises(pydantic.ValidationError, match="labels.reference: name the reference candidate"):
        LabelsConfig(source="reference")
    with pytest.raises(pydantic.ValidationError, match="labels.source is 'vote'"):
        LabelsConfig(source="vote", reference="big")
    assert LabelsConfig(source="reference", reference="big").reference == "big"


def test_split_shares_must_sum_to_one():
    with pytest.raises(pydantic.ValidationError, match="sum to 1"):
        PromptsConfig.model_validate({"split": {"train": 0.9, "val": 0.2, "test": 0.1}})


def test_a_reference_outside_the_declared_pool_is_refused_when_params_load(tmp_path):
    """Caught before any stage runs (it used to fail in the labels stage, after the whole tournament)."""
    import yaml

    from jouleroute.config import ParamsError, load_params
    from tests.loop.conftest import main_params

    params = main_params() | {"labels": {"source": "reference", "reference": "tiny-c"},
                              "grpo": {"reward_source": "profile"}, "tournament": {"train_fraction": 1.0}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError, match=r"labels.reference: 'tiny-c' is not a candidate of the pool \(pool: "
                                          r"tiny-a, tiny-b\)"):
        load_params(path)
    params["labels"]["reference"] = "tiny-b"
    path.write_text(yaml.safe_dump(params))
    assert load_params(path).labels.reference == "tiny-b"
