"""The no-gold study presets (scripts/no_gold_studies.py) are generated, and each trains on labels without gold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from jouleroute.config import load_params
from jouleroute.stages import table

REPO = Path(__file__).resolve().parents[2]


def test_the_presets_are_what_the_script_writes():
    done = subprocess.run([sys.executable, str(REPO / "scripts/no_gold_studies.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_each_preset_labels_without_gold_and_reads_its_base_pipelines_profile():
    presets = sorted(REPO.glob("studies/nogold-*/params.yaml"))
    assert len(presets) == 4
    for path in presets:
        params = load_params(path)
        assert params.labels.source in ("reference", "vote"), path
        assert params.grpo.reward_source != "live", path  # live rollouts grade on gold
        stages = table.read(path.parent / "dvc.yaml")
        assert list(stages)[:2] in (["labels", "validate"], ["tournament", "labels"]), path
        assert "${paths.profile}" in stages["labels"].deps
