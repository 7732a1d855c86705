"""A params copy cannot clobber the main pipeline (issue 31): what the user did, under real DVC and git.

They copied params.yaml, changed a value and ran `jouleroute --params copy.yaml prepare`: it replaced the
DVC-tracked artifacts/prepare/queries.parquet, and plain `dvc checkout` then refused. Now a copy's outputs go
under artifacts/<name>/ (mlruns/<name>/), and a stage that would still write a pipeline's tracked output
(the shared converted models, a study's paths kept in a copy) is refused in one line before it runs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import yaml

from tests.pipeline.conftest import BIN, REPO, make_repo, run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def jouleroute(root, *args, check=True):
    return run([sys.executable, "-m", "jouleroute", *args], root, check=check)


def test_a_params_copy_never_overwrites_what_dvc_tracks(tmp_path):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["tracking"]["enabled"] = False
    root = make_repo(tmp_path / "repo", params)
    run([str(BIN / "dvc"), "repro", "prepare"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "prepare"], root)
    tracked = root / "artifacts/prepare/queries.parquet"
    before = tracked.read_bytes()

    copy = yaml.safe_load((root / "params.yaml").read_text())  # the user's copy, one value changed
    copy["prepare"]["seed"] = 1
    (root / "copy.yaml").write_text(yaml.safe_dump(copy, sort_keys=False))
    jouleroute(root, "--params", "copy.yaml", "prepare")
    assert tracked.read_bytes() == before  # dvc.yaml's output untouched
    mine = root / "artifacts/copy/prepare/queries.parquet"
    assert mine.read_bytes() != before  # the copy's own (another seed), under its namespace
    status = run([str(BIN / "dvc"), "status", "prepare"], root).stdout
    assert "up to date" in status, status
    assert run([str(BIN / "dvc"), "checkout", "prepare"], root).returncode == 0  # plain checkout, no --force

    refused = jouleroute(root, "--params", "copy.yaml", "models", check=False)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1:] == [
        "jouleroute models: copy.yaml: `models` would write artifacts/models, an output of dvc.yaml (stage models); "
        "a params copy writes only its own outputs: set paths.models_dir in copy.yaml (e.g. artifacts/copy/...)"]
    repro = jouleroute(root, "--params", "copy.yaml", "repro", check=False)  # dvc.yaml would run params.yaml
    assert repro.returncode == 1 and "copy.yaml is a params copy" in repro.stderr, repro.stderr
    where = jouleroute(root, "--params", "copy.yaml", "where").stdout
    assert "artifacts/copy/prepare/queries.parquet" in where and "mlruns/copy/mlflow.db" in where, where


def test_a_copy_that_keeps_a_study_s_paths_is_refused_and_the_study_s_own_file_is_not(tmp_path):
    """A copy of studies/replay/params.yaml beside it keeps the study's paths (not the main pipeline's): running the
    study's first stage with it would overwrite the study's tracked profile, so it is refused; the study's own
    params file writes them as before (`make study`)."""
    from jouleroute.stages import StageFailed
    from jouleroute.stages.context import StageContext

    for name in ("params.yaml", "dvc.yaml", "studies/replay/params.yaml", "studies/replay/dvc.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tmp_path / name)
    shutil.copy2(REPO / "studies/replay/params.yaml", tmp_path / "studies/replay/mine.yaml")
    mine = StageContext.load(tmp_path / "studies/replay/mine.yaml", root=tmp_path)
    assert mine.namespace == "mine" and mine.params.paths.profile == "studies/replay/artifacts/profile.parquet"
    with pytest.raises(StageFailed, match=r"mine\.yaml: `replay` would write studies/replay/artifacts/queries\.parquet, "
                                          r"an output of studies/replay/dvc\.yaml \(stage replay\)"):
        mine.check_outputs("replay")
    study = StageContext.load(tmp_path / "studies/replay/params.yaml", root=tmp_path)
    assert study.namespace is None and study.params.paths.profile == "studies/replay/artifacts/profile.parquet"
    assert study.params.paths.data_root == "data/external" and study.params.paths.models_dir == "artifacts/models"
    study.check_outputs("replay")
    main = StageContext.load(tmp_path / "params.yaml", root=tmp_path)
    assert main.namespace is None and main.params.paths.queries == "artifacts/prepare/queries.parquet"


def test_a_copy_of_a_pool_s_params_beside_its_dvc_yaml_cannot_write_the_pool_s_outputs(tmp_path):
    """pools/mine/params.yaml (written by `jouleroute import --init`) is that pipeline's own; other.yaml beside it,
    a copy keeping its paths, is refused where it would write the pool's tracked outputs."""
    from jouleroute.commands.pool_init import init_pool
    from jouleroute.stages import StageFailed
    from jouleroute.stages.context import StageContext

    shutil.copy2(REPO / "params.yaml", tmp_path / "params.yaml")
    shutil.copy2(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    init_pool(tmp_path, "pools/mine", "data/mine.csv")
    shutil.copy2(tmp_path / "pools/mine/params.yaml", tmp_path / "pools/mine/other.yaml")
    own = StageContext.load(tmp_path / "pools/mine/params.yaml", root=tmp_path)
    assert own.namespace is None
    own.check_outputs("validate")
    copy = StageContext.load(tmp_path / "pools/mine/other.yaml", root=tmp_path)
    with pytest.raises(StageFailed, match=r"other\.yaml: `validate` would write pools/mine/artifacts/validate, an output "
                                          r"of pools/mine/dvc\.yaml \(stage validate\)"):
        copy.check_outputs("validate")


def test_a_copy_named_as_a_pipeline_would_share_its_store_and_is_refused(tmp_path):
    """`replay.yaml`, a copy of params.yaml, would write under artifacts/replay/ and log into mlruns/replay/, the
    replay study's MLflow store: its runs would mix with the study's. Refused in one line; another name is fine."""
    from jouleroute.config import ParamsError
    from jouleroute.stages.context import StageContext

    for name in ("params.yaml", "dvc.yaml", "studies/replay/params.yaml", "studies/replay/dvc.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tmp_path / name)
    shutil.copy2(REPO / "params.yaml", tmp_path / "replay.yaml")
    with pytest.raises(ParamsError, match=r"replay\.yaml: a params copy writes under artifacts/replay/ and "
                                          r"mlruns/replay/, the namespace of the pipeline in studies/replay/"):
        StageContext.load(tmp_path / "replay.yaml", root=tmp_path)
    shutil.copy2(REPO / "params.yaml", tmp_path / "mine.yaml")
    assert StageContext.load(tmp_path / "mine.yaml", root=tmp_path).params.paths.mlflow_db.startswith("mlruns/mine/")
