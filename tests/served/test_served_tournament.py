"""A served pool profiled by the tournament: two servers, each metered by its own exporter process.

The exporters' counters are stubbed at the NVML boundary (tests/served/stub_counter.py: idle draw + a known
joules per generated token, read from the server's own token counter); every process, scrape and parse is
real. Candidate `short` writes at most 4 tokens, `long` up to 24.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.served.conftest import IDLE_W, REPO, start_meter, stop

PER_TOKEN = 0.5


def served_params(pool: dict, exporters: dict[str, str]) -> dict:
    from tests.pipeline.conftest import tiny_params

    params = tiny_params(Path("unused"))
    params["prepare"]["samples"] = {t: 1 for t in params["prepare"]["samples"]}
    params["paths"]["data_dir"] = str(REPO / "data/external/benchmarks")
    params["models"] = {n: {"source": "served", "served_name": f"tiny-{n}"} for n in ("a", "b")}
    params["backend"] = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "concurrency": 2, "max_retries": 0}
    params["energy"] = {"meter": "estimate", "idle_seconds": 1.0}
    params["tracking"]["enabled"] = False
    params["pool"] = [
        {"candidate_id": "short", "model": "a", "prompt_style": "chat", "answer_style": "direct",
         "max_new_tokens": 4, "batch_size": 2, "base_url": pool["a"]["server"],
         "energy": {"exporter_url": exporters["a"], "gpus": [0], "j_per_output_token": 0.05}},
        {"candidate_id": "long", "model": "b", "prompt_style": "chat", "answer_style": "direct",
         "max_new_tokens": 24, "batch_size": 2, "base_url": pool["b"]["server"],
         "energy": {"exporter_url": exporters["b"], "gpus": [0], "reference": "mistralai/Mistral-7B-Instruct-v0.3"}},
    ]
    return params


def make_root(tmp_path: Path, params: dict) -> Path:
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext

    (tmp_path / "data").mkdir()
    (tmp_path / "data/external").mkdir(parents=True, exist_ok=True)
    (tmp_path / "data/external/energy").symlink_to(REPO / "data/external/energy")  # ML.ENERGY, in the data root
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    STAGES["prepare"].run(StageContext.load(tmp_path / "params.yaml", tmp_path))
    return tmp_path


def run(root: Path, progress=None) -> pd.DataFrame:
    from jouleroute.stages.context import StageContext
    from jouleroute.stages.tournament import tournament_inputs
    from jouleroute.tournament import run_tournament

    inputs = tournament_inputs(StageContext.load(root / "params.yaml", root))
    return run_tournament(inputs, run_id=uuid.uuid4().hex[:12], progress=progress)


def test_every_row_is_measured_on_its_own_node_and_sums_match_the_counters(pool, tmp_path):
    exporters = {n: pool[n]["exporter"] for n in ("a", "b")}
    profile = run(make_root(tmp_path, served_params(pool, exporters)))
    assert set(profile["energy_source"]) == {"measured-nvml"}
    for name, cand in (("a", "short"), ("b", "long")):
        rows = profile[profile["candidate_id"] == cand]
        assert rows["energy_attribution"].str.contains(f"meter=exporter:{exporters[name]}", regex=False).all()
        assert rows["idle_power_w"].iloc[0] == pytest.approx(IDLE_W, rel=0.15)  # idle read on the node, recorded
        known = PER_TOKEN * rows["output_tokens"].sum()  # what the counter rose by for this candidate's tokens
        assert rows["energy_net_j"].sum() == pytest.approx(known, rel=0.05)
        # raw = the counter's rise over the windows: tokens plus the idle draw during them (each batch counted once)
        windows = rows.drop_duplicates("window_s")["window_s"].sum()
        assert rows["energy_j"].sum() == pytest.approx(known + IDLE_W * windows, rel=0.05)
    mean = profile.groupby("candidate_id")["energy_j"].mean()
    tokens = profile.groupby("candidate_id")["output_tokens"].mean()
    assert tokens["long"] > tokens["short"] and mean["long"] > mean["short"]


def test_an_exporter_that_dies_mid_run_leaves_modelled_rows_and_a_warning(pool, tmp_path, caplog):
    meter, url = start_meter(pool["b"]["root"], tmp_path / "meter-dying.log")
    exporters = {"a": pool["a"]["exporter"], "b": url}
    root = make_root(tmp_path, served_params(pool, exporters))

    def progress(total, label):
        def tick(n):
            if label == "long":
                stop(meter)  # after the first batch of `long`
        return tick

    try:
        with caplog.at_level("WARNING"):
            profile = run(root, progress)
    finally:
        stop(meter)
    long = profile[profile["candidate_id"] == "long"].sort_values("query_id")
    assert set(profile.loc[profile["candidate_id"] == "short", "energy_source"]) == {"measured-nvml"}
    sources = long["energy_source"].value_counts().to_dict()
    assert sources.get("measured-nvml", 0) == 2 and sources.get("modelled", 0) == len(long) - 2
    modelled = long[long["energy_source"] == "modelled"]
    assert modelled["energy_attribution"].str.contains("Mistral-7B-Instruct-v0.3", regex=False).all()
    assert (modelled["energy_j"] > 0).all()  # priced from tokens, never this client's CPU time
    assert any("MODELLED" in r.message and "long" in r.message for r in caplog.records)
