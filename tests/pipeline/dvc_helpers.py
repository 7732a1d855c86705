"""What the tests of the whole pipeline under real DVC share (test_dvc_pipeline.py, test_round_trip.py): reading
the shard stores, which stages ran or are stale, the MLflow store's stage runs, the CLI called in-process."""

from __future__ import annotations

import json

import pandas as pd
import yaml

from jouleroute.stages.table import stage_order
from tests.pipeline.conftest import BIN, REPO, run

STAGES = stage_order(REPO / "dvc.yaml")


def shard_rows(folder) -> pd.DataFrame:
    """Every row of the shards under ``folder`` (a shard store's layout: <candidate version>/<batch>.parquet)."""
    return pd.concat([pd.read_parquet(p) for p in sorted(folder.glob("*/*.parquet"))], ignore_index=True)


def store_rows(root) -> pd.DataFrame:
    """Every pair stored: the tournament's shard store, then the live-pair cache (the pairs GRPO's and budget's
    rollouts ran); a pair in both (the tournament adopted it) once, the tournament's copy."""
    stores = (root / "artifacts/tournament/shards", root / "artifacts/cache/live_pairs")
    rows = pd.concat([shard_rows(folder) for folder in stores], ignore_index=True)
    return rows.drop_duplicates(["query_id", "candidate_id"]).reset_index(drop=True)


def ran(stdout: str) -> set[str]:
    return {s for s in STAGES if f"Running stage '{s}'" in stdout}


def edit_params(root, edit) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    edit(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def stale(root) -> set[str]:
    """Stages `dvc status` reports as changed (params or deps)."""
    out = run([str(BIN / "dvc"), "status"], root).stdout
    return {s for s in STAGES if f"\n{s}:" in "\n" + out}


def mlflow_client(root):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns/mlflow.db'}")


def stage_runs(client) -> dict:
    exp = client.get_experiment_by_name("jouleroute").experiment_id
    runs = client.search_runs([exp], filter_string="tags.run_kind = 'stage'", order_by=["attributes.start_time DESC"])
    latest = {}
    for r in runs:
        latest.setdefault(r.data.tags["stage"], r)
    return latest


def evidence_checkpoint(repo) -> str:
    return json.loads((repo / "artifacts/grpo/metrics.json").read_text()).get("kept", "grpo")


def in_process(root, monkeypatch, capfd, *argv) -> tuple[int, str, str]:
    """``jouleroute ARGV`` by the CLI's own `main`, in ``root``, in this process (no interpreter start-up):
    exit status, stdout, stderr (``capfd``: a subprocess it starts, `dvc repro`, is captured too)."""
    from jouleroute.cli import main

    monkeypatch.chdir(root)
    capfd.readouterr()
    status = main(list(argv))
    out, err = capfd.readouterr()
    return status, out, err


def flat_keys(metrics: dict, prefix: str = "") -> dict:
    """metrics.json's keys as `dvc exp show` names its columns (nested keys joined by dots)."""
    flat = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            flat.update(flat_keys(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
