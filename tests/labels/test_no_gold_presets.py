"""The no-gold study presets (scripts/no_gold_studies.py) are generated, and each trains on labels without gold."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from jouleroute.config import load_params
from jouleroute.stages import table

REPO = Path(__file__).resolve().parents[2]
PRESETS = sorted(REPO.glob("studies/nogold-*/params.yaml"))


def test_the_presets_are_what_the_script_writes():
    done = subprocess.run([sys.executable, str(REPO / "scripts/no_gold_studies.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_each_preset_labels_without_gold_and_reads_its_base_pipelines_profile():
    assert len(PRESETS) == 4
    for path in PRESETS:
        params = load_params(path)
        assert params.labels.source in ("reference", "vote"), path
        assert params.grpo.reward_source != "live", path  # live rollouts grade on gold
        stages = table.read(path.parent / "dvc.yaml")
        assert list(stages)[:2] in (["labels", "validate"], ["tournament", "labels"]), path
        assert "${paths.profile}" in stages["labels"].deps


def test_reference_presets_state_a_budget_and_vote_presets_keep_iso_accuracy():
    """Under reference labels the reference is right by definition, so iso-accuracy would ask for agreement with it
    (scripts/no_gold_studies.py): those presets state an energy budget instead."""
    assert PRESETS  # the four presets (the test above counts them)
    for path in PRESETS:
        params = load_params(path)
        target = params.router.target
        if params.labels.source == "reference":
            assert target is not None and target.kind == "energy_share" and 0 < target.value < 1, path
        else:
            assert target is None, path


def test_each_preset_pages_the_gold_trained_point_of_its_own_pool():
    assert PRESETS  # the four presets (the test above counts them)
    for path in PRESETS:
        params = load_params(path)
        gold = params.paths.gold_headline
        assert gold is not None and (REPO / gold).is_file(), path
        assert load_params(REPO / gold.replace("metrics.json", "params.yaml")).labels.source == "gold", path
        assert "${paths.gold_headline}" in table.read(path.parent / "dvc.yaml")["study_page"].deps, path


def test_the_page_shows_the_gold_trained_point_beside_and_names_a_missing_headline(tmp_path):
    import json

    import pytest
    import yaml

    from jouleroute.stages.context import StageContext
    from jouleroute.stages.study_page import _gold_beside

    def headline(labels, kind, name, dacc, verdict, share):
        return {"dep": {"kind": kind, "name": name, "acc": 0.8, "dacc": dacc, "share": share, "gain": share,
                        "verdict": verdict}, "labels": labels}

    (tmp_path / "ours.json").write_text(json.dumps(headline("reference:big", "cascade", "a > big", -0.006,
                                                           "non-inferior", 0.738)))
    (tmp_path / "gold.json").write_text(json.dumps(headline("gold", "route", "mf", -0.003, "non-inferior", 0.656)))
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["paths"] |= {"headline": "ours.json", "gold_headline": "gold.json"}
    raw["router"]["target"] = {"energy_share": 0.8}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    ctx = StageContext.load(tmp_path / "params.yaml", tmp_path)
    text = "\n".join(_gold_beside(ctx))
    assert "≤ 80% of the best single's energy" in text
    assert "| these labels | `reference:big` | cascade a > big | -0.006 | non-inferior | 74% |" in text
    assert "| gold | `gold` | route mf | -0.003 | non-inferior | 66% |" in text
    (tmp_path / "gold.json").unlink()
    with pytest.raises(FileNotFoundError, match="gold.json does not exist"):
        _gold_beside(ctx)
