"""A process loads each model once per run, and loading is metered apart from every query's energy.

Serial, in-process, two tiny models (one folder copied: same weights, another model to load),
pool order tiny, tiny2, tiny and one batch per job: loading per job would load 11 times, and
loading in pool order with one model held would load tiny twice. Energy is the labelled
CPU-time estimate (no GPU, no RAPL here).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    from jouleroute.backends.tiny import build_tiny_llama
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext
    from tests.pipeline.conftest import tiny_params

    root = tmp_path_factory.mktemp("loading")
    model = build_tiny_llama(root / "tiny")
    shutil.copytree(model, root / "tiny2")
    params = tiny_params(model)
    params["prepare"]["samples"] = {t: 1 for t in params["prepare"]["samples"]}
    params["paths"]["data_dir"] = str(REPO / "data/external/benchmarks")
    params["models"]["tiny2"] = {"source": "local", "path": str(root / "tiny2"), "chat_template": True}
    params["pool"][1]["model"] = "tiny2"
    for cand in params["pool"]:
        cand["batch_size"] = 2
    params["energy"]["idle_seconds"] = 0.05
    params["tracking"]["enabled"] = False
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    STAGES["prepare"].run(StageContext.load(root / "params.yaml", root))
    return root


def test_serial_run_loads_each_model_once_and_keeps_loading_out_of_row_energy(work):
    from jouleroute.stages.context import StageContext
    from jouleroute.stages.tournament import tournament_inputs
    from jouleroute.tournament import loaded_count, run_tournament

    inputs = tournament_inputs(StageContext.load(work / "params.yaml", work))
    profile = run_tournament(inputs, run_id=uuid.uuid4().hex[:12], batches_per_job=1)
    run = json.loads((work / "artifacts/tournament/shards/state.json").read_text())["runs"][-1]
    records = run["model_loads"]
    loads = [r for r in records if r["phase"] == "load"]
    assert run["jobs"] == 12  # 3 candidates x 4 batches of 2 (7 queries), one batch per job
    assert [r["model"] for r in loads] == ["tiny", "tiny2"] and loaded_count() == 2
    assert Counter(r["candidate_id"] for r in records if r["phase"] == "warmup") == Counter(
        c["candidate_id"] for c in yaml.safe_load((work / "params.yaml").read_text())["pool"])  # once each
    assert all(r["energy_source"] == "estimated" and r["energy_j"] >= 0 and r["time_s"] > 0 for r in records)
    # rows hold only their answering windows: their joules add up to the shards' windows, loads stay apart
    windows_j = sum(s["energy_j"] for s in run["shards"])
    assert profile["energy_j"].sum() == pytest.approx(windows_j, rel=1e-9)
    assert sum(r["energy_j"] for r in records) > 0  # the load windows measured something, kept out of the rows
    assert len(profile) == 21 and not profile.duplicated(["query_id", "candidate_id"]).any()


def test_a_workers_torch_threads_stop_at_its_share_of_the_cores():
    from jouleroute.backends import BackendConfig
    from jouleroute.tournament.run import backend_settings

    assert backend_settings(BackendConfig(torch_threads=2), 1).torch_threads == 1
    assert backend_settings(BackendConfig(torch_threads=1), 4).torch_threads == 1
    assert backend_settings(BackendConfig(torch_threads=2), None).torch_threads == 2
