"""docs/replay.md shows the default `replay:` params; keep it equal to the code's defaults."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from jouleroute.replay import ImportConfig, ReplayConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "replay.md"


def _yaml_blocks() -> list[dict]:
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)]


def test_documented_replay_params_are_the_defaults() -> None:
    replay = next(b["replay"] for b in _yaml_blocks() if "replay" in b)
    assert ReplayConfig(**replay) == ReplayConfig()


def test_documented_import_example_is_valid() -> None:
    section = next(b["import_outcomes"] for b in _yaml_blocks() if "import_outcomes" in b)
    assert ImportConfig(**section).models["my-7b"].reference == "mistralai/Mistral-7B-Instruct-v0.3"
