"""The RouterBench replay on the real shipped outcomes (ARC-Challenge: it holds the upstream quirks)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from jouleroute.replay import EnergyMapping, ImportConfig, ReplayConfig, ReplayModel, run_import, run_replay
from jouleroute.replay.tables import provenance_path
from jouleroute.schema import PROFILE_SCHEMA, QUERY_SCHEMA

SOURCE = Path("data/external/outcomes/routerbench")
OPEN_MODELS = {
    "mistralai/mistral-7b-chat", "mistralai/mixtral-8x7b-chat", "meta/llama-2-70b-chat", "zero-one-ai/Yi-34B-Chat",
    "meta/code-llama-instruct-34b-chat", "WizardLM/WizardLM-13B-V1.2",
}  # fmt: skip


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> dict:
    repo_root = Path(__file__).resolve().parents[2]
    out = tmp_path_factory.mktemp("replay")
    cfg = ReplayConfig(tasks=("arc_challenge",))
    summary = run_replay(cfg, repo_root, out / "queries.parquet", out / "profile.parquet")
    return {
        "cfg": cfg, "summary": summary, "root": repo_root, "out": out,
        "profile": pd.read_parquet(out / "profile.parquet"), "queries": pd.read_parquet(out / "queries.parquet"),
        "provenance": pd.read_parquet(provenance_path(out / "profile.parquet")),
    }  # fmt: skip


def test_schema_and_invariants_the_validate_stage_checks(replay: dict) -> None:
    assert pq.read_schema(replay["out"] / "profile.parquet").remove_metadata() == PROFILE_SCHEMA
    assert pq.read_schema(replay["out"] / "queries.parquet").remove_metadata() == QUERY_SCHEMA
    profile = replay["profile"]
    assert (profile["energy_source"] == "modelled").all()
    assert (profile["energy_j"] > 0).all() and (profile["latency_s"] > 0).all()
    assert not profile.duplicated(["query_id", "candidate_id"]).any()
    assert (profile.groupby("query_id")["candidate_id"].nunique() == 6).all()  # a complete matrix


def test_closed_models_are_excluded_by_default(replay: dict) -> None:
    assert set(replay["profile"]["model_id"]) == OPEN_MODELS
    assert set(replay["summary"]["excluded_models"]) == {
        "gpt-3.5-turbo-1106", "gpt-4-1106-preview", "claude-instant-v1", "claude-v1", "claude-v2",
    }  # fmt: skip


def test_correctness_and_split_are_routerbench_s(replay: dict) -> None:
    merged = replay["profile"].merge(replay["provenance"], on=["query_id", "candidate_id"])
    for source_file, rows in merged.groupby("source_file"):
        raw = pd.read_csv(replay["root"] / source_file)
        recorded = [raw.at[r, m] for r, m in zip(rows["source_row"], rows["source_field"])]
        assert rows["correct"].tolist() == [int(v) for v in recorded]
        sample_ids = raw["sample_id"].to_numpy()[rows["source_row"]]
        assert rows["query_id"].tolist() == [f"routerbench/arc-challenge/{s}" for s in sample_ids]
        upstream = "test" if source_file.endswith("_test.csv") else "train"
        allowed = {"test"} if upstream == "test" else {"train", "val"}
        assert set(rows["split"]) <= allowed
    splits = replay["queries"]["split"].value_counts()
    assert 0.05 < splits["val"] / (splits["val"] + splits["train"]) < 0.15  # ~10% of train, by hash


def test_duplicated_upstream_records_keep_the_complete_one(replay: dict) -> None:
    dropped = replay["summary"]["dropped_records"]
    assert len(dropped) == 14 and all(set(d["unscored_models"]) == OPEN_MODELS for d in dropped)
    kept = replay["queries"].set_index("query_id")
    for record in dropped:
        assert f"routerbench/arc-challenge/{record['sample_id']}" in kept.index  # its twin is the one kept


def test_energy_is_priced_from_the_mapped_reference(replay: dict) -> None:
    cfg, profile = replay["cfg"], replay["profile"]
    provenance = replay["provenance"].set_index(["query_id", "candidate_id"])
    row = profile[profile["candidate_id"] == "llama-2-70b-chat"].iloc[0]
    ref_file = provenance.loc[(row["query_id"], row["candidate_id"]), "energy_reference_file"]
    assert "Meta-Llama-3.1-70B-Instruct/bs128+" in ref_file
    ref = json.loads((replay["root"] / ref_file).read_text())
    j_out = ref["Energy/req (J)"] / ref["Avg Output Tokens"]
    share = cfg.energy.prefill_share
    expected = row["input_tokens"] * share * j_out + row["output_tokens"] * j_out
    assert row["energy_j"] == pytest.approx(expected)
    ttft = row["input_tokens"] * share / ref["Token tput (tok/s)"]
    assert row["latency_s"] == pytest.approx(ttft + row["output_tokens"] * ref["Avg TPOT (s)"])


def test_include_closed_needs_user_figures_for_every_closed_model(tmp_path: Path) -> None:
    repo_root = Path(__file__).resolve().parents[2]
    gpt4 = ReplayModel(
        candidate_id="gpt-4", j_per_output_token=1.0, tpot_s=0.02, prefill_tokens_per_s=1e4, reason="user figure"
    )
    cfg = ReplayConfig(tasks=("mbpp",), include_closed=True, closed_models={"gpt-4-1106-preview": gpt4})
    uncovered = r"\['gpt-3.5-turbo-1106', 'claude-instant-v1', 'claude-v1', 'claude-v2'\]"
    with pytest.raises(ValueError, match=r"include_closed.*no entry: " + uncovered):
        run_replay(cfg, repo_root, tmp_path / "q.parquet", tmp_path / "p.parquet")


def test_closed_models_included_with_user_figures_are_modelled(tmp_path: Path) -> None:
    repo_root = Path(__file__).resolve().parents[2]
    source = tmp_path / "routerbench"  # the first rows of each real file keep this test fast
    source.mkdir()
    for path in (repo_root / SOURCE).glob("mbpp_*.csv"):
        pd.read_csv(path, index_col=0).head(5).to_csv(source / path.name)
    closed = ["gpt-3.5-turbo-1106", "gpt-4-1106-preview", "claude-instant-v1", "claude-v1", "claude-v2"]
    closed_models = {
        name: ReplayModel(candidate_id=name.replace("claude-", "c-"), j_per_output_token=1.0, tpot_s=0.02,
                          prefill_tokens_per_s=1e4, reason="user-supplied for the test")
        for name in closed
    }  # fmt: skip
    cfg = ReplayConfig(source_dir=str(source), tasks=("mbpp",), include_closed=True, closed_models=closed_models)
    summary = run_replay(cfg, repo_root, tmp_path / "q.parquet", tmp_path / "p.parquet")
    profile = pd.read_parquet(tmp_path / "p.parquet")
    assert summary["excluded_models"] == [] and profile["model_id"].nunique() == 11 and len(profile) == 10 * 11
    assert (profile["energy_source"] == "modelled").all()
    gpt4 = profile[profile["model_id"] == "gpt-4-1106-preview"]
    assert (gpt4["energy_j"] == gpt4["input_tokens"] * 0.15 * 1.0 + gpt4["output_tokens"] * 1.0).all()


def test_bad_score_names_file_row_and_field(tmp_path: Path) -> None:
    repo_root = Path(__file__).resolve().parents[2]
    source = tmp_path / "routerbench"
    shutil.copytree(repo_root / SOURCE, source, ignore=shutil.ignore_patterns("arc_*", "winograde_*"))
    frame = pd.read_csv(source / "mbpp_test.csv", index_col=0)
    frame.loc[frame.index[3], "meta/llama-2-70b-chat"] = 0.5
    frame.to_csv(source / "mbpp_test.csv")
    cfg = ReplayConfig(source_dir=str(source), tasks=("mbpp",))
    with pytest.raises(ValueError, match=r"mbpp_test.csv row 3 field 'meta/llama-2-70b-chat': score must be 0 or 1"):
        run_replay(cfg, repo_root, tmp_path / "q.parquet", tmp_path / "p.parquet")


def test_importer_reproduces_the_replay_from_its_own_tokens(tmp_path: Path) -> None:
    """One energy model, two entry points: a replay written out as an import table prices identically."""
    repo_root = Path(__file__).resolve().parents[2]
    source = tmp_path / "routerbench"
    source.mkdir()
    for path in (repo_root / SOURCE).glob("winograde_*.csv"):
        pd.read_csv(path, index_col=0).head(8).to_csv(source / path.name)
    cfg = ReplayConfig(source_dir=str(source), tasks=("winogrande",))
    run_replay(cfg, repo_root, tmp_path / "q.parquet", tmp_path / "p.parquet")
    replayed = pd.read_parquet(tmp_path / "p.parquet")
    questions = pd.read_parquet(tmp_path / "q.parquet").set_index("query_id")["question"]
    table = replayed.rename(columns={"candidate_id": "candidate"})[
        ["query_id", "task", "split", "candidate", "correct", "output_text", "input_tokens", "output_tokens"]
    ].assign(prompt=replayed["query_id"].map(questions))
    table.to_csv(tmp_path / "outcomes.csv", index=False)
    mapping = {m.candidate_id: EnergyMapping(**m.model_dump(exclude={"candidate_id"})) for m in cfg.models.values()}
    run_import(ImportConfig(input_file=str(tmp_path / "outcomes.csv"), models=mapping), repo_root,
               tmp_path / "iq.parquet", tmp_path / "ip.parquet")  # fmt: skip
    imported = pd.read_parquet(tmp_path / "ip.parquet")
    columns = ["query_id", "candidate_id", "split", "correct", "energy_j", "latency_s", "ttft_s", "batch_size"]
    pd.testing.assert_frame_equal(replayed[columns], imported[columns])
