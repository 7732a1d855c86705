"""The MLflow store decided by jouleroute.tracking: artifacts inside the store, a moved store relocated,
a foreign location refused, the router registry. Real MLflow on sqlite in tmp_path."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from jouleroute.tracking import (TrackingStoreError, experiment_id, register_champion, register_router, stage_run,
                                 tag_router_version, tracking_uri)


@pytest.fixture(scope="module")
def migrated_db(tmp_path_factory) -> Path:
    """One empty, migrated MLflow database; tests copy it (MLflow's schema migration costs seconds per store)."""
    db = tmp_path_factory.mktemp("template") / "mlflow.db"
    MlflowClient(tracking_uri=tracking_uri(db)).search_experiments()
    return db


def _store(template: Path, clone: Path) -> str:
    """A clone folder with its own (copied) store; returns the tracking URI."""
    (clone / "mlruns").mkdir(parents=True)
    shutil.copy2(template, clone / "mlruns/mlflow.db")
    return tracking_uri(clone / "mlruns/mlflow.db")


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def _one_stage_run(root: Path, tmp_file: Path) -> str:
    uri = tracking_uri(root / "mlruns/mlflow.db")  # the clone's own store
    with stage_run(uri, "exp", "prepare", {"git_sha": "x"}, {"prepare.seed": 0}) as run:
        run.log_metrics({"n_queries": 3, "skipped": None, "nan": float("nan")})
        run.log_artifact(tmp_file)
    return run.run_id


def test_stage_run_keeps_artifacts_beside_the_store_and_tags_it(tmp_path, migrated_db):
    note = tmp_path / "note.txt"
    note.write_text("hello")
    _store(migrated_db, tmp_path / "clone")
    run_id = _one_stage_run(tmp_path / "clone", note)
    client = MlflowClient(tracking_uri=tracking_uri(tmp_path / "clone/mlruns/mlflow.db"))
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["run_kind"] == "stage" and run.data.tags["energy_source"] == "none"
    assert run.data.metrics == {"n_queries": 3.0}  # None and NaN are not logged
    assert run.data.params["prepare.seed"] == "0"
    assert _local(run.info.artifact_uri).is_relative_to(tmp_path / "clone/mlruns/artifacts/exp")
    assert (_local(run.info.artifact_uri) / "note.txt").read_text() == "hello"


def test_a_stage_run_lasts_as_long_as_the_stage(tmp_path, migrated_db):
    """Results are logged when the stage ends; the run still starts when the stage began."""
    uri = _store(migrated_db, tmp_path / "clone")
    began = int(time.time() * 1000) - 90_000  # a stage that started 90 s ago
    with stage_run(uri, "exp", "tournament", {}, {}, start_time_ms=began) as run:
        pass
    info = MlflowClient(tracking_uri=uri).get_run(run.run_id).info
    assert info.start_time == began and info.end_time - info.start_time >= 90_000


def test_a_failing_stage_leaves_a_failed_run(tmp_path, migrated_db):
    uri = _store(migrated_db, tmp_path)
    with pytest.raises(RuntimeError):
        with stage_run(uri, "exp", "validate", {}, {}) as run:
            raise RuntimeError("boom")
    assert MlflowClient(tracking_uri=uri).get_run(run.run_id).info.status == "FAILED"


def test_a_copied_clone_writes_inside_itself_and_keeps_old_artifacts_readable(tmp_path, migrated_db):
    note = tmp_path / "note.txt"
    note.write_text("hello")
    _store(migrated_db, tmp_path / "original")
    first = _one_stage_run(tmp_path / "original", note)
    shutil.copytree(tmp_path / "original", tmp_path / "copy")
    shutil.rmtree(tmp_path / "original")  # the copy must not need (or write into) the original
    second = _one_stage_run(tmp_path / "copy", note)
    client = MlflowClient(tracking_uri=tracking_uri(tmp_path / "copy/mlruns/mlflow.db"))
    for run_id in (first, second):
        folder = _local(client.get_run(run_id).info.artifact_uri)
        assert folder.is_relative_to(tmp_path / "copy"), folder
        assert (folder / "note.txt").read_text() == "hello"
    assert not (tmp_path / "original").exists()


def test_a_location_outside_the_store_is_refused(tmp_path, migrated_db):
    uri = _store(migrated_db, tmp_path)
    client = MlflowClient(tracking_uri=uri)
    client.create_experiment("foreign", artifact_location=(tmp_path / "elsewhere").as_uri())
    with pytest.raises(TrackingStoreError, match="outside this store"):
        experiment_id(client, uri, "foreign")


def test_register_router_adds_a_tagged_version_per_call(tmp_path, migrated_db):
    uri = _store(migrated_db, tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    versions = []
    for _ in range(2):
        with stage_run(uri, "jouleroute", "grpo", {}, {}) as run:
            versions.append(register_router(uri, "jouleroute", run.run_id, model,
                                            {"lambda_min": 0.0, "lambda_max": 2.0}))
    assert versions == ["1", "2"]
    assert tag_router_version(uri, "jouleroute", "2", {"aiq": 0.5}) == "2"
    # a version this store never registered (grpo ran against a store since removed): a warning, not a failed stage
    assert tag_router_version(uri, "jouleroute", "9", {"aiq": 0.5}) is None
    assert "aiq" not in MlflowClient(tracking_uri=uri).get_model_version("jouleroute-router", "1").tags
    client = MlflowClient(tracking_uri=uri)
    latest = client.get_model_version("jouleroute-router", "2")
    assert latest.tags["lambda_max"] == "2.0" and latest.tags["aiq"] == "0.5"
    pointer = client.download_artifacts(latest.run_id, "router/pointer.json", str(tmp_path))
    assert "model.safetensors" in Path(pointer).read_text()


def test_a_store_written_by_older_code_is_relocated_too(tmp_path, migrated_db):
    """Stores made before the per-experiment folder used ``<store>/artifacts`` (and no root tag)."""
    uri = _store(migrated_db, tmp_path / "a")
    client = MlflowClient(tracking_uri=uri)
    client.create_experiment("old", artifact_location=(tmp_path / "a/mlruns/artifacts").as_uri())
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    moved = tracking_uri(tmp_path / "b/mlruns/mlflow.db")
    exp = experiment_id(MlflowClient(tracking_uri=moved), moved, "old")
    location = MlflowClient(tracking_uri=moved).get_experiment(exp).artifact_location
    assert location == (tmp_path / "b/mlruns/artifacts").as_uri()


def test_names_mlflow_refuses_are_logged_under_a_name_it_accepts(tmp_path, migrated_db):
    """A public pool's model names (``Llama-3.1-405B-Inst@sambanova``) reach param and metric names: MLflow
    refuses ``@``, which once failed the zeroeval-math study's first stage. They are logged with ``_`` instead."""
    uri = _store(migrated_db, tmp_path)
    with stage_run(uri, "exp", "outcomes", {"pool@host": "a+b"},
                   {"public_pool.models.Llama-3.1-405B-Inst@sambanova.reference": "llama-3.1-405b",
                    "public_pool.models.Llama-3.1-405B-Inst_sambanova.reference": "a clash: the first is kept"}) as run:
        run.log_metrics({"accuracy.Mixtral-8x7B(instruct)": 0.5})
    data = MlflowClient(tracking_uri=uri).get_run(run.run_id).data
    assert data.params == {"public_pool.models.Llama-3.1-405B-Inst_sambanova.reference": "llama-3.1-405b"}
    assert data.metrics == {"accuracy.Mixtral-8x7B_instruct_": 0.5}
    assert data.tags["pool_host"] == "a+b"  # a tag's value is free text


def test_registry_version_tags_with_names_mlflow_refuses_are_kept(tmp_path, migrated_db):
    """A contender named ``lm/sft+query-energy`` gives the champion's version a tag ``val_utility.lm/sft+query-energy``;
    MLflow refuses ``+``, which once failed `make run`'s evaluate after every figure was computed."""
    uri = _store(migrated_db, tmp_path)
    champion = tmp_path / "champion"
    champion.mkdir()
    (champion / "champion.json").write_text("{}")
    with stage_run(uri, "jouleroute", "evaluate", {}, {}) as run:
        version = register_champion(uri, "jouleroute", run.run_id, {"family": "lm"},
                                    {"val_utility.lm/sft+query-energy": 0.5}, champion)
    client = MlflowClient(tracking_uri=uri)
    tags = client.get_model_version("jouleroute-champion", version).tags
    assert tags["val_utility.lm/sft_query-energy"] == "0.5" and tags["family"] == "lm"
    model = tmp_path / "model"
    model.mkdir()
    with stage_run(uri, "jouleroute", "grpo", {}, {}) as run:
        router = register_router(uri, "jouleroute", run.run_id, model, {"lambda_max+": 2.0})
    assert tag_router_version(uri, "jouleroute", router, {"routers.lm/sft+query-energy.aiq": 0.7}) == router
    tags = client.get_model_version("jouleroute-router", router).tags
    assert tags["lambda_max_"] == "2.0" and tags["routers.lm/sft_query-energy.aiq"] == "0.7"
