"""GRPO with live partial feedback (grpo.reward_source: live) on tiny local models.

A tiny repository's prepared queries and its pool of three tiny-model candidates (the tournament's backend,
the estimate meter); router datasets from a made-up profile of that pool, SFT on about a third of the train queries.
GRPO rolls out k=2 of the 3 candidates on the others: each sampled pair in neither the tournament's shard
store nor the live-pair cache is answered, graded and metered by the tournament's own ``run_job`` and stored
in the cache (the tournament's store is only read). What a row came from is read off its ``run_id`` (each
live run has its own): an executed pair is a row of that run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from dataclasses import replace
from functools import partial
from pathlib import Path

import pandas as pd
import pytest
import yaml

from jouleroute.tournament.live import LiveOutcomes
from jouleroute.tournament.jobs import candidate_key
from jouleroute.tournament.run import run_tournament
from jouleroute.tournament.shards import ShardStore, read_shard_meta
from jouleroute.training.config import GrpoConfig, RouterDataConfig, SftConfig
from jouleroute.training.grpo import run_grpo
from jouleroute.training.partial_feedback import PROFILED_FILE
from jouleroute.training.router_data import run_router_data
from jouleroute.training.sft import read_jsonl, run_sft

REPO = Path(__file__).resolve().parents[2]


def live_cfg(**changes) -> GrpoConfig:
    # a hot policy (temperature 3): the SFT router's favourite would otherwise take every rollout
    base = dict(reward_source="live", num_generations=2, max_steps=4, prompts_per_step=2, logging_steps=1,
                save_steps=50, learning_rate=1e-3, temperature=3.0, threads=1)
    return GrpoConfig(**{**base, **changes})


def stored_rows(inputs, where: str = "live_pairs_dir") -> pd.DataFrame:
    """The rows of the live-pair cache (or, ``where="shards_dir"``, of the tournament's shard store)."""
    keys = [candidate_key(c, inputs.models[c.model]) for c in inputs.pool]
    return ShardStore(getattr(inputs, where)).read_all(keys)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def tournament_inputs(root: Path):
    from jouleroute.stages.context import StageContext
    from jouleroute.stages.tournament import tournament_inputs as inputs_of

    return inputs_of(StageContext.load(root / "params.yaml", root))


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_model_dir) -> Path:
    """A tiny repository with prepared queries, router datasets of its pool and an SFT router of a third of them."""
    from jouleroute.backends.tiny import build_tiny_llama
    from jouleroute.stages import STAGES
    from jouleroute.stages.context import StageContext
    from tests.pipeline.conftest import tiny_params

    root = tmp_path_factory.mktemp("live")
    params = tiny_params(build_tiny_llama(root / "tiny"))
    shutil.copytree(root / "tiny", root / "tiny2")  # a second model: each is loaded once per GRPO run
    params["models"]["tiny2"] = {"source": "local", "path": str(root / "tiny2"), "chat_template": True}
    params["pool"][1]["model"] = "tiny2"
    params["prepare"]["samples"] = {t: 6 for t in params["prepare"]["samples"]}
    params["paths"]["data_dir"] = str(REPO / "data/external/benchmarks")
    params["energy"]["idle_seconds"] = 0.05
    params["tracking"]["enabled"] = False
    params["paths"].update(router_data_dir="data", sft_dir="sft", grpo_dir="grpo", trunk_cache="cache")
    params["router_data"] = {"lambdas": [0.0, 2.0], "label_policy": "utility"}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    ctx = StageContext.load(root / "params.yaml", root)
    STAGES["prepare"].run(ctx)
    queries = pd.read_parquet(ctx.path("queries"))
    # router datasets need a full profile; the unprofiled train queries' outcomes in it are never read by live
    profile = pd.DataFrame([{"query_id": q.query_id, "candidate_id": c["candidate_id"], "task": q.task,
                             "split": q.split, "correct": (i + j) % 2, "energy_j": 1.0 + j,
                             "energy_net_j": 0.5 + j, "energy_source": "estimated"}
                            for i, q in enumerate(queries.itertuples()) for j, c in enumerate(params["pool"])])
    run_router_data(profile, queries, RouterDataConfig(lambdas=(0.0, 2.0), label_policy="utility"), root / "data")
    cfg = SftConfig(max_steps=1, batch_size=4, learning_rate=1e-2, save_steps=50, threads=1)
    run_sft(cfg, root / "data", tiny_model_dir, root / "sft", share=0.3)
    shutil.rmtree(ctx.path("shards_dir"), ignore_errors=True)  # the stores start empty
    shutil.rmtree(ctx.path("live_pairs_dir"), ignore_errors=True)
    return root


@pytest.fixture(scope="module")
def two_runs(work):
    """The same GRPO run twice, on one shard store: (metrics, rows after the first, rows after the second)."""
    inputs = tournament_inputs(work)
    first = run_grpo(live_cfg(), work / "data", work / "sft", work / "grpo1", live=partial(LiveOutcomes, inputs))
    after_first = stored_rows(inputs)
    second = run_grpo(live_cfg(), work / "data", work / "sft", work / "grpo2", live=partial(LiveOutcomes, inputs))
    return first, second, after_first, stored_rows(inputs)


def pairs(frame: pd.DataFrame) -> set[tuple[str, str]]:
    return set(zip(frame["query_id"], frame["candidate_id"]))


def test_live_rollouts_are_stored_once_and_a_rerun_executes_none(two_runs, work):
    first, second, after_first, after_second = two_runs
    executed = {tuple(p) for p in json.loads((work / "grpo1" / "executed_pairs.json").read_text())}
    revealed = {(q, c) for q, c, _n in json.loads((work / "grpo1" / "revealed_pairs.json").read_text())}
    profiled = set(json.loads((work / "sft" / PROFILED_FILE).read_text())["query_ids"])
    assert executed and executed == revealed == pairs(after_first)  # the store started empty
    assert not {q for q, _c in executed} & profiled  # rollouts only on the queries SFT did not profile
    assert after_first["run_id"].nunique() == 1 and after_first["energy_source"].eq("estimated").all()
    inputs = tournament_inputs(work)
    model_of = {c.candidate_id: c.model for c in inputs.pool}
    assert not inputs.shards_dir.exists()  # live rollouts never write the tournament's store
    loads = [r["model"] for path in ShardStore(inputs.live_pairs_dir).shard_files()
             for r in read_shard_meta(path).get("model_loads", []) if r["phase"] == "load"]
    # both models answered, each loaded once, though rollouts switch candidates from batch to batch
    assert sorted(loads) == sorted({model_of[c] for _q, c in executed}) == ["tiny", "tiny2"]
    assert first["profiling"]["grpo_revealed"]["executed_pairs"] == len(executed)
    # the second run samples the same pairs (same seed) and reads every one from the store
    assert second["profiling"]["grpo_revealed"]["executed_pairs"] == 0
    assert json.loads((work / "grpo2" / "executed_pairs.json").read_text()) == []
    assert second["profiling"]["grpo_revealed"]["pairs"] == len(revealed)
    pd.testing.assert_frame_equal(after_first, after_second)  # no row added, none rewritten
    assert second["profiling"]["total_joules"] == pytest.approx(first["profiling"]["total_joules"])


def test_profiling_joules_are_the_profiled_and_revealed_pairs(two_runs, work):
    first, _second, after_first, _ = two_runs
    bill = first["profiling"]
    rows = {r["query_id"]: r for r in read_jsonl(work / "data" / "train.jsonl")}
    profiled = json.loads((work / "sft" / PROFILED_FILE).read_text())["query_ids"]
    assert bill["tournament"]["joules"] == pytest.approx(
        sum(e for q in profiled for e in rows[q]["energy_by_candidate"].values()))
    assert bill["grpo_revealed"]["joules"] == pytest.approx(after_first["energy_j"].sum()) and bill["grpo_revealed"][
        "joules"] > 0
    assert bill["total_joules"] == pytest.approx(bill["tournament"]["joules"] + bill["grpo_revealed"]["joules"])
    assert bill["by_source"] == pytest.approx({"estimated": bill["total_joules"]})
    assert bill["reward_source"] == "live" and bill["energy_column"] == "energy_j"


def test_a_later_tournament_reuses_the_pairs_grpo_ran(two_runs, work, tmp_path):
    _first, _second, after_first, _ = two_runs
    inputs = tournament_inputs(work)
    cache = snapshot(inputs.live_pairs_dir)
    profile = run_tournament(inputs, run_id=uuid.uuid4().hex[:12])
    assert snapshot(inputs.live_pairs_dir) == cache  # the tournament only reads the cache
    assert not profile.duplicated(["query_id", "candidate_id"]).any()
    assert len(profile) == len(inputs.queries) * len(inputs.pool)
    kept = profile.set_index(["query_id", "candidate_id"]).loc[sorted(pairs(after_first))]
    assert (kept["run_id"] == after_first["run_id"].iloc[0]).all()  # GRPO's rows, not run again
    adopted = [read_shard_meta(f).get("adopted_from") for f in ShardStore(inputs.shards_dir).shard_files()]
    assert sum(bool(a) for a in adopted) and all(Path(a).parent.parent == inputs.live_pairs_dir for a in adopted if a)
    # a live run now reads the tournament's rows and writes nothing into its store; one of another meter
    # (another config hash) neither reads nor clears it
    store = snapshot(inputs.shards_dir)
    third = run_grpo(live_cfg(), work / "data", work / "sft", tmp_path / "grpo3", live=partial(LiveOutcomes, inputs))
    assert third["profiling"]["grpo_revealed"]["executed_pairs"] == 0
    other = replace(inputs, energy=inputs.energy.model_copy(update={"idle_seconds": 0.07}),
                    live_pairs_dir=tmp_path / "other_cache")
    every = list(zip(profile["query_id"], profile["candidate_id"]))
    assert LiveOutcomes(other, "energy_j", profile["query_id"]).stored_rows(every).empty
    assert snapshot(inputs.shards_dir) == store


def test_a_checkpoints_pairs_lost_with_the_cache_are_answered_again(two_runs, work, tmp_path):
    """Resuming GRPO after the live-pair cache was deleted: the reads the checkpoint saved are answered anew."""
    _first, _second, after_first, _ = two_runs
    inputs = replace(tournament_inputs(work), live_pairs_dir=tmp_path / "deleted_cache",
                     shards_dir=tmp_path / "no_tournament_yet")
    saved = [(q, c, 2) for q, c in sorted(pairs(after_first))[:1]]
    outcomes = LiveOutcomes(inputs, "energy_j", after_first["query_id"])
    outcomes.restore(saved)
    assert outcomes.executed == {saved[0][:2]} and dict(outcomes.reads) == {saved[0][:2]: 2}
    assert pairs(stored_rows(inputs)) == {saved[0][:2]}


def test_live_needs_the_tournament_source(work, tmp_path):
    with pytest.raises(ValueError, match="live needs the tournament's outcome source"):
        run_grpo(live_cfg(), work / "data", work / "sft", tmp_path)


KILLED_RUN = """
import os, signal, sys
from functools import partial
from pathlib import Path
from transformers import TrainerCallback
from jouleroute.stages.context import StageContext
from jouleroute.stages.tournament import tournament_inputs
from jouleroute.tournament.live import LiveOutcomes
from jouleroute.training.config import GrpoConfig
from jouleroute.training.grpo import run_grpo

root, out, kill_at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
cfg = GrpoConfig.model_validate_json(sys.argv[4])

class Kill(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):  # step's pairs stored, its checkpoint not saved
        if state.global_step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

live = partial(LiveOutcomes, tournament_inputs(StageContext.load(root / "params.yaml", root)))
run_grpo(cfg, root / "data", root / "sft", out, callbacks=[Kill()] if kill_at else [], live=live)
"""


@pytest.mark.integration
def test_a_sigkilled_live_run_resumes_without_running_a_pair_again(work, tmp_path):
    """SIGKILL at the end of step 3 (its rollouts stored, checkpoint-2 the last saved): the resumed run
    redoes step 3 from checkpoint-2 and reads that step's pairs from the live-pair cache."""
    import shutil

    shutil.copytree(work, tmp_path / "w", ignore=shutil.ignore_patterns("grpo*", "shards", "live_pairs"))
    root, out = tmp_path / "w", tmp_path / "w" / "grpo"
    cfg = live_cfg(max_steps=4, save_steps=2).model_dump_json()
    script = tmp_path / "killed_run.py"
    script.write_text(KILLED_RUN)
    killed = subprocess.run([sys.executable, str(script), str(root), str(out), "3", cfg], cwd=REPO,
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-3000:]
    inputs = tournament_inputs(root)
    before = stored_rows(inputs)
    assert len(before) and not (out / "metrics.json").exists()
    saved = {(q, c) for q, c, _n in json.loads((out / "checkpoints/checkpoint-2/revealed_pairs.json").read_text())}
    lost = pairs(before) - saved  # stored by step 3, whose checkpoint the kill prevented
    assert lost
    resumed = subprocess.run([sys.executable, str(script), str(root), str(out), "0", cfg], cwd=REPO,
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = stored_rows(inputs)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["resumed_from"].endswith("checkpoint-2")
    assert not after.duplicated(["query_id", "candidate_id"]).any()
    by_pair = lambda f: f.sort_values(["query_id", "candidate_id"]).reset_index(drop=True)  # noqa: E731
    pd.testing.assert_frame_equal(by_pair(after[after["run_id"].isin(set(before["run_id"]))]), by_pair(before))
    executed = {tuple(p) for p in json.loads((out / "executed_pairs.json").read_text())}
    assert not executed & pairs(before)  # the resumed run ran no pair the killed one had stored
    revealed = {(q, c) for q, c, _n in json.loads((out / "revealed_pairs.json").read_text())}
    assert lost <= revealed  # step 3 redone: its pairs read from the store
    assert revealed <= pairs(after) and metrics["profiling"]["grpo_revealed"]["joules"] == pytest.approx(
        after.set_index(["query_id", "candidate_id"]).loc[sorted(revealed), "energy_j"].sum())


def test_the_grpo_stage_runs_live_rollouts_into_the_live_pair_cache(work, tmp_path):
    """`jouleroute grpo` with reward_source: live: the stage hands GRPO the tournament's backend, its store to
    read and the live-pair cache to write."""
    from jouleroute.stages.context import StageContext
    from jouleroute.stages.grpo import grpo_stage

    shutil.copytree(work, tmp_path / "w", ignore=shutil.ignore_patterns("grpo*", "shards", "live_pairs"))
    root = tmp_path / "w"
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["grpo"] = {**live_cfg(max_steps=2).model_dump(mode="json"), "keep_best_on_val": False}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    metrics = grpo_stage(StageContext.load(root / "params.yaml", root))
    stored = stored_rows(tournament_inputs(root))
    bill = metrics["profiling"]
    assert bill["reward_source"] == "live" and bill["grpo_revealed"]["executed_pairs"] == len(stored) > 0
    assert bill["grpo_revealed"]["joules"] == pytest.approx(stored["energy_j"].sum())
    assert metrics["kept"] == "grpo" and (root / "grpo" / "model").is_dir()
