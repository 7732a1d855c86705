"""``prepare.source: prompts``: the config it needs, and a bad prompts file failing in one line that names the
file and the line (the tournament side: tests/tournament/test_open_prompts.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from jouleroute.benchmarks import BenchmarkDataError, PrepareConfig

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("section, message", [
    ({"source": "prompts"}, "needs prepare.prompts.file"),
    ({"prompts": {"file": "p.jsonl"}}, "prepare.source is 'bundled'"),
    ({"source": "prompts", "prompts": {"file": "p.jsonl", "columns": "prompt"}}, "prompts.columns"),
    ({"source": "prompts", "prompts": {"task": "user"}}, "prompts.file"),
])
def test_the_prompts_section_is_strict(section, message):
    with pytest.raises(ValidationError, match=message.replace(".", r"\.")):
        PrepareConfig(**section)


def test_the_prompts_section_is_the_labels_prompts_config_plus_a_file():
    from jouleroute.labels.config import PromptsConfig

    cfg = PrepareConfig(source="prompts", prompts={"file": "p.parquet", "task": "support", "split": {"train": 0.8, "val": 0.1, "test": 0.1}})
    assert isinstance(cfg.prompts, PromptsConfig) and cfg.prompts.task == "support" and cfg.prompts.split.train == 0.8


def test_a_bad_line_fails_the_stage_in_one_line_naming_the_file_and_the_line(tmp_path):
    from jouleroute.commands.errors import expected_error
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"] = {"source": "prompts", "prompts": {"file": "inbox/prompts.jsonl"}}
    params["tracking"]["enabled"] = False
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (tmp_path / "inbox").mkdir()
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    (tmp_path / "inbox/prompts.jsonl").write_text(f"{good}\n{{not json\n")
    with pytest.raises(BenchmarkDataError) as failed:
        STAGES["prepare"].run(StageContext.load(tmp_path / "params.yaml", tmp_path))
    message = expected_error(failed.value, None)
    assert message.startswith("data error: inbox/prompts.jsonl:2: not JSON") and "\n" not in message
    assert not (tmp_path / "artifacts/prepare/queries.parquet").exists()
