"""The command line: help texts, params errors that name the key, validation failures."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
import yaml

from jouleroute.cli import main
from jouleroute.stages import STAGES
from tests.pipeline.conftest import BIN, REPO, run


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_stage_has_help(stage, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([stage, "--help"])
    assert exit_info.value.code == 0
    assert len(capsys.readouterr().out.strip().splitlines()) >= 3


def test_unknown_params_key_is_named(tmp_path, capsys):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["pool"][0]["max_new_token"] = 16
    params["tournament"]["seeed"] = 1
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(params))
    assert main(["--params", str(bad), "prepare"]) == 1
    err = capsys.readouterr().err
    assert "pool.0.max_new_token" in err and "tournament.seeed" in err


def test_wrong_type_is_named(tmp_path, capsys):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["pool"][1]["batch_size"] = "eight"
    bad = tmp_path / "params.yaml"
    bad.write_text(yaml.safe_dump(params))
    assert main(["--params", str(bad), "prepare"]) == 1
    assert "pool.1.batch_size" in capsys.readouterr().err


@pytest.mark.parametrize("corruption,expected", [
    ("duplicate", "pair appears at most once"),
    ("negative_energy", "energy_j"),
    ("unknown_source", "energy_source"),
    ("missing_column", "latency_s"),
])
def test_corrupted_profile_fails_validate_with_a_named_problem(tiny_repo, tmp_path, corruption, expected):
    profile_path = tiny_repo / "artifacts/tournament/profile.parquet"
    if not profile_path.exists():
        run([str(BIN / "dvc"), "repro", "validate"], tiny_repo)
    work = tmp_path / "work"
    shutil.copytree(tiny_repo / "artifacts", work / "artifacts")
    shutil.copy2(tiny_repo / "params.yaml", work / "params.yaml")
    profile = pd.read_parquet(work / "artifacts/tournament/profile.parquet")
    if corruption == "duplicate":
        profile = pd.concat([profile, profile.iloc[[0]]])
    elif corruption == "negative_energy":
        profile.loc[profile.index[0], "energy_j"] = -1.0
    elif corruption == "unknown_source":
        profile.loc[profile.index[0], "energy_source"] = "guessed"
    else:
        profile = profile.drop(columns=["latency_s"])
    profile.to_parquet(work / "artifacts/tournament/profile.parquet")
    done = run([str(BIN / "jouleroute"), "validate"], work, check=False)
    assert done.returncode == 1
    assert expected in done.stderr.lower() or expected in done.stderr
