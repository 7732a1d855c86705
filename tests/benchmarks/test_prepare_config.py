"""PrepareConfig rejects typos and impossible settings with messages that say what is wrong."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jouleroute.benchmarks import TASK_NAMES, PrepareConfig


def test_defaults_cover_every_task():
    cfg = PrepareConfig()
    assert tuple(cfg.samples) == TASK_NAMES and cfg.samples["bbh"] >= 27
    assert cfg.source == "bundled" and set(cfg.hf) == set(TASK_NAMES)


def test_unknown_task_in_samples_is_named():
    with pytest.raises(ValidationError, match="unknown task 'gsm8kk' in prepare.samples"):
        PrepareConfig(samples={"gsm8kk": 5})


def test_unknown_task_in_hf_is_named():
    with pytest.raises(ValidationError, match="unknown task 'arc' in prepare.hf"):
        PrepareConfig(hf={"arc": "allenai/ai2_arc"})


def test_unknown_key_is_rejected():
    with pytest.raises(ValidationError, match="sample_size"):
        PrepareConfig.model_validate({"seed": 1, "sample_size": 3})


def test_split_fractions_must_sum_to_one():
    with pytest.raises(ValidationError, match="sum to 1"):
        PrepareConfig(split={"train": 0.7, "val": 0.2, "test": 0.2})


def test_sample_sizes_must_be_positive():
    with pytest.raises(ValidationError, match="samples.mmlu must be >= 1"):
        PrepareConfig(samples={"mmlu": 0})


def test_local_source_needs_a_folder():
    with pytest.raises(ValidationError, match="local_dir"):
        PrepareConfig(source="local")


def test_unknown_source_is_rejected():
    with pytest.raises(ValidationError):
        PrepareConfig(source="s3")
