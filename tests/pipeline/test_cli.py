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
def test_corrupted_profile_fails_validate_with_a_named_problem(tiny_repo, tmp_path, corruption, expected, monkeypatch,
                                                               capsys):
    profile_path = tiny_repo / "artifacts/tournament/profile.parquet"
    if not profile_path.exists():
        run([str(BIN / "dvc"), "repro", "validate"], tiny_repo)
    work = tmp_path / "work"
    shutil.copytree(tiny_repo / "artifacts", work / "artifacts")
    params = yaml.safe_load((tiny_repo / "params.yaml").read_text())
    params["tracking"]["enabled"] = False  # a fresh MLflow store per copy would only add its migration time
    (work / "params.yaml").write_text(yaml.safe_dump(params))
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
    # in this process, as the neighbouring one-line-error tests run the CLI: the same `main` a subprocess runs,
    # without a fresh interpreter's imports (torch, Great Expectations) per case
    monkeypatch.chdir(work)
    capsys.readouterr()
    assert main(["labels"]) == 0  # gold labels pass the rows on as they are: validate names the problem
    assert main(["validate"]) == 1
    err = capsys.readouterr().err
    assert expected in err.lower() or expected in err


def _params_file(tmp_path, edit=None):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    if edit:
        edit(params)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def test_params_option_works_before_or_after_the_command(tmp_path, capsys):
    good = _params_file(tmp_path)
    assert main(["--params", str(good), "check-params"]) == 0
    assert main(["check-params", "--params", str(good)]) == 0
    (tmp_path / "bad").mkdir()
    bad = _params_file(tmp_path / "bad", lambda p: p.update(evalute=p.pop("evaluate")))
    capsys.readouterr()
    assert main(["check-params", "--params", str(bad)]) == 1
    assert "evalute: unknown section (did you mean 'evaluate'?)" in capsys.readouterr().err


def test_repro_forwards_dvc_options_and_keeps_its_own(tiny_repo):
    """`jouleroute repro -f --dry evaluate` reaches `dvc repro` whole (real DVC, a dry run changes nothing);
    `--params` after the target is still jouleroute's: a broken file there stops DVC from starting."""
    done = run([str(BIN / "jouleroute"), "repro", "-f", "--dry", "evaluate"], tiny_repo)
    assert "Running stage 'evaluate'" in done.stdout, done.stdout
    bad = tiny_repo.parent / "bad-params.yaml"
    bad.write_text((tiny_repo / "params.yaml").read_text().replace("router:", "routr:", 1))
    done = run([str(BIN / "jouleroute"), "repro", "--dry", "evaluate", "--params", str(bad)], tiny_repo, check=False)
    assert done.returncode == 1 and "routr: unknown section (did you mean 'router'?)" in done.stderr, done.stderr
    assert "Running stage" not in done.stdout


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    mine = [line for line in lines if line.startswith(f"jouleroute {command}: ")]
    assert len(mine) == 1, err
    return mine[0]


def test_a_missing_input_is_one_line_naming_the_stage_to_run(tmp_path):
    _params_file(tmp_path)
    done = run([str(BIN / "jouleroute"), "validate"], tmp_path, check=False)
    assert done.returncode == 1
    line = _one_error_line(done.stderr, "validate")
    assert "artifacts/labels/profile.parquet" in line and "`dvc repro labels`" in line
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    debug = run([str(BIN / "jouleroute"), "validate", "--debug"], tmp_path, check=False)
    assert debug.returncode == 1 and "Traceback" in debug.stderr


def test_sft_without_converted_models_names_the_models_stage(tmp_path):
    """The router's base model comes from the main pipeline's `models` stage, for a study's params too."""
    _params_file(tmp_path)
    (tmp_path / "artifacts/router_data").mkdir(parents=True)
    study = tmp_path / "studies/replay"
    study.mkdir(parents=True)
    shutil.copy2(REPO / "studies/replay/dvc.yaml", study / "dvc.yaml")
    shutil.copy2(REPO / "studies/replay/params.yaml", study / "params.yaml")
    (study / "artifacts/router_data").mkdir(parents=True)
    for params in ("params.yaml", "studies/replay/params.yaml"):
        done = run([str(BIN / "jouleroute"), "--params", params, "sft"], tmp_path, check=False)
        assert done.returncode == 1, done.stderr
        line = _one_error_line(done.stderr, "sft")
        assert "missing input artifacts/models" in line and "`dvc repro models`" in line, line


def test_a_data_error_is_one_line_naming_file_and_row(tmp_path, monkeypatch, capsys):
    shutil.copytree(REPO / "data/external/benchmarks", tmp_path / "data/external/benchmarks")
    gsm8k = tmp_path / "data/external/benchmarks/gsm8k/test.jsonl"
    gsm8k.write_text("{not json\n" + gsm8k.read_text())
    _params_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["prepare"]) == 1
    line = _one_error_line(capsys.readouterr().err, "prepare")
    assert "data error:" in line and "gsm8k/test.jsonl, row 0" in line


def _copy_inputs(tiny_repo, work):
    """The profile and its validation: stages after `validate` refuse a profile that did not pass it."""
    if not (tiny_repo / "artifacts/validate/report.json").exists():
        run([str(BIN / "dvc"), "repro", "validate"], tiny_repo)
    for item in ("artifacts/prepare", "artifacts/tournament", "artifacts/labels", "artifacts/validate", "params.yaml"):
        (shutil.copytree if (tiny_repo / item).is_dir() else shutil.copy2)(tiny_repo / item, work / item)


def test_an_unavailable_meter_is_one_line(tiny_repo, tmp_path, monkeypatch, capsys):
    from jouleroute.energy.factory import nvml_usable, rapl_usable

    if nvml_usable() or rapl_usable():
        pytest.skip("this machine has an energy counter: the zeus meter is available")
    _copy_inputs(tiny_repo, tmp_path)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["energy"]["meter"] = "zeus"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate"]) == 1
    assert "no energy meter:" in _one_error_line(capsys.readouterr().err, "evaluate")


def test_mixed_energy_sources_are_one_line(tiny_repo, tmp_path, monkeypatch, capsys):
    _copy_inputs(tiny_repo, tmp_path)
    for path in (tmp_path / "artifacts/tournament/profile.parquet", tmp_path / "artifacts/labels/profile.parquet"):
        profile = pd.read_parquet(path)
        profile.loc[profile["candidate_id"] == profile["candidate_id"].iloc[0], "energy_source"] = "modelled"
        profile.to_parquet(path)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["tracking"]["enabled"] = False
    params["baselines"]["families"] = ["random"]  # the error comes from scoring, not from the routers
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate"]) == 1
    assert "refusing to compare energy across sources" in _one_error_line(capsys.readouterr().err, "evaluate")


def test_a_key_given_twice_or_a_file_that_is_no_text_is_one_line_naming_it(tmp_path, capsys):
    # PyYAML keeps the last of two `router:` sections silently, dropping the first's keys
    twice = tmp_path / "twice.yaml"
    twice.write_text((REPO / "params.yaml").read_text() + "router:\n  lam: 0.5\n")
    assert main(["--params", str(twice), "check-params"]) == 1
    err = capsys.readouterr().err
    assert "'router' is given twice" in err and "line" in err and "Traceback" not in err
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"router: \xff\n")
    assert main(["--params", str(binary), "check-params"]) == 1
    assert "not UTF-8 text" in capsys.readouterr().err
    assert main(["--params", str(tmp_path), "check-params"]) == 1  # a folder
    assert "cannot be read as a params file" in capsys.readouterr().err


def test_a_command_run_from_a_subdirectory_of_the_project_says_where_to_run_it(tmp_path, monkeypatch, capsys):
    (tmp_path / ".dvc").mkdir()
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path / "docs")  # the paths in params files are the root's: from here they would all miss
    assert main(["--params", "../params.yaml", "where"]) == 1
    assert f"run it from the project root, {tmp_path.resolve()}" in capsys.readouterr().err


def test_meter_reads_no_params_and_a_bad_counter_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("bad: [\n")  # a broken params.yaml beside it is none of its business
    assert main(["meter", "--counter", "nosuch_module_x:factory"]) == 1
    err = capsys.readouterr().err
    assert "--counter nosuch_module_x:factory: ModuleNotFoundError" in err and "Traceback" not in err
    assert main(["meter", "--counter-arg", "bad"]) == 2
    assert "--counter-arg 'bad': write it as KEY=VALUE" in capsys.readouterr().err
