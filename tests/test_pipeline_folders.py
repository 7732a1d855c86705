"""A study (or a pool of `jouleroute import --init`) is a DVC repository of its own, in its folder: its `paths:` are
relative to that folder, as its dvc.yaml's are, and DVC runs there (issue 31: plain `dvc status` at the root lists
the main pipeline only)."""

from __future__ import annotations

import shutil
from pathlib import Path

from jouleroute.commands.exp import in_repo_overrides
from jouleroute.commands.repro import in_repo
from jouleroute.config import load_params
from jouleroute.paths import PathsConfig, pipeline_folder, rooted
from jouleroute.stages import table

REPO = Path(__file__).resolve().parents[1]


def _study(root: Path, name: str = "replay") -> Path:
    for rel in ("params.yaml", "dvc.yaml", f"studies/{name}/params.yaml", f"studies/{name}/dvc.yaml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel.replace(f"studies/{name}", "studies/replay"), root / rel)
    (root / ".dvc").mkdir()
    (root / f"studies/{name}/.dvc").mkdir()
    return root / f"studies/{name}"


def test_a_study_s_paths_are_relative_to_its_folder_and_shared_inputs_stay_the_repository_s(tmp_path):
    study = _study(tmp_path)
    assert pipeline_folder(study / "params.yaml", tmp_path) == study.resolve()
    assert pipeline_folder(study / "mine.yaml", tmp_path) == study.resolve()  # a copy beside it reads the same
    assert pipeline_folder(tmp_path / "params.yaml", tmp_path) == tmp_path.resolve()
    legacy = tmp_path / "pools/old"  # a pipeline the root's DVC runs (`wdir: ../..`): its paths are the root's
    legacy.mkdir(parents=True)
    (legacy / "dvc.yaml").write_text("stages: {}\n")
    assert pipeline_folder(legacy / "params.yaml", tmp_path) == tmp_path.resolve()
    paths = load_params(study / "params.yaml", tmp_path).paths
    assert paths.queries == "studies/replay/artifacts/queries.parquet"
    assert paths.data_root == "data/external" and paths.mlflow_db == "mlruns/replay/mlflow.db"
    assert paths.study_doc == "docs/replay-study.md" and paths.headline == "studies/replay/metrics.json"
    assert load_params(study / "params.yaml").paths.queries == "artifacts/queries.parquet"  # no root: as written
    # a key the study leaves unset: an output defaults into its folder, a shared input stays the repository's
    bare = rooted(PathsConfig(), study / "params.yaml", tmp_path)
    assert bare.sft_dir == "studies/replay/artifacts/sft" and bare.data_manifest == "data/manifest.yaml"
    assert rooted(PathsConfig(), tmp_path / "params.yaml", tmp_path) == PathsConfig()


def test_dvc_runs_in_the_study_s_own_repository(tmp_path):
    study = _study(tmp_path)
    assert table.dvc_repo_of(study / "dvc.yaml", tmp_path) == study.resolve()
    assert table.dvc_repo_of(tmp_path / "dvc.yaml", tmp_path) == tmp_path.resolve()
    assert table.target(tmp_path, study / "dvc.yaml", "sft") == "sft"
    plain = tmp_path / "studies/plain"  # a dvc.yaml in no subrepo of its own: the root's DVC runs it
    plain.mkdir()
    (plain / "dvc.yaml").write_text("stages: {}\n")
    assert table.target(tmp_path, plain / "dvc.yaml", "x") == "studies/plain/dvc.yaml:x"


def test_repro_and_exp_arguments_given_from_the_root_are_made_relative_to_the_study(tmp_path, monkeypatch):
    study = _study(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert in_repo(["-f", "studies/replay/dvc.yaml:sft", "evaluate", "studies/replay/dvc.yaml"], study.resolve()) \
        == ["-f", "dvc.yaml:sft", "evaluate", "dvc.yaml"]
    assert in_repo(["dvc.yaml"], tmp_path.resolve()) == ["dvc.yaml"]
    assert in_repo_overrides(["-S", "studies/replay/params.yaml:router.lam=2", "-S", "sft.epochs=1", "-n", "x"],
                             study.resolve()) == ["-S", "params.yaml:router.lam=2", "-S", "sft.epochs=1", "-n", "x"]


def test_minus_c_runs_the_command_as_if_started_there(tmp_path, monkeypatch, capsys):
    from jouleroute.cli import main

    study = _study(tmp_path)
    monkeypatch.chdir(study)
    assert main(["-C", "../..", "--params", "studies/replay/params.yaml", "check-params"]) == 0
    assert Path.cwd() == tmp_path.resolve()
    assert "studies/replay/params.yaml: ok" in capsys.readouterr().out
