"""The studies/heldout-* presets: the replay study with one task held out each, kept in step with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from jouleroute.config import load_params
from jouleroute.replay import ReplayConfig

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted((ROOT / "studies").glob("heldout-*/params.yaml"))
SHARED_ON_PURPOSE = {"data_root", "data_manifest", "data_dir", "models_dir", "embedding_cache", "trunk_cache"}  # inputs and content-keyed caches


def test_presets_are_what_the_generator_writes_from_the_replay_study() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "heldout_studies.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_each_task_is_held_out_once_and_the_rest_is_the_replay_study_s() -> None:
    replay = load_params(ROOT / "studies" / "replay" / "params.yaml")
    held = []
    for path in PRESETS:
        params = load_params(path)
        held += list(params.replay.test_tasks)
        assert path.parent.name == f"heldout-{params.replay.test_tasks[0]}"
        # Apart from the split, the paths and the tracking experiment, the preset is the replay study.
        same = ("profile_source", "models", "backend", "energy", "energy_policy", "validate", "router_data", "sft",
                "grpo", "router", "baselines", "evaluate")
        assert {k: getattr(params, k) for k in same} == {k: getattr(replay, k) for k in same}
        assert params.replay.model_copy(update={"test_tasks": ()}) == replay.replay
    assert sorted(held) == sorted(ReplayConfig().tasks)


def test_no_two_studies_write_the_same_output() -> None:
    studies = [ROOT / "studies" / "replay" / "params.yaml", *PRESETS]
    owner: dict[str, str] = {}
    for path in studies:
        paths = load_params(path).paths.model_dump()  # relative to the root, as in every params file
        for key, value in paths.items():
            if key in SHARED_ON_PURPOSE or value is None:  # an optional path the params leave unset
                continue
            assert value not in owner, f"{path.parent.name} and {owner.get(value)} both write {value} ({key})"
            owner[value] = path.parent.name
