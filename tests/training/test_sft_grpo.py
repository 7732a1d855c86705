"""SFT and GRPO on a tiny local model: weights move, checkpoints load, MLflow records, resume works."""

from __future__ import annotations

import pytest
import torch
from conftest import toy_tables
from transformers import AutoModelForCausalLM, TrainerCallback

from jouleroute.routing.lm.router import LMRouter
from jouleroute.tracking import stage_run
from jouleroute.training.common import StepProgress
from jouleroute.training.config import GrpoConfig, RouterDataConfig, SftConfig
from jouleroute.training.grpo import run_grpo
from jouleroute.training.router_data import run_router_data
from jouleroute.training.sft import run_sft

LAMBDAS = (0.0, 2.0)


def changed(before, after) -> bool:
    """True when any parameter of the two saved models differs."""
    a = AutoModelForCausalLM.from_pretrained(str(before), dtype=torch.float32).state_dict()
    b = AutoModelForCausalLM.from_pretrained(str(after), dtype=torch.float32).state_dict()
    assert a.keys() == b.keys()
    return any(not torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("router_data")
    profile, queries = toy_tables()
    run_router_data(profile, queries, RouterDataConfig(lambdas=LAMBDAS), out)
    return out


@pytest.fixture(scope="module")
def sft_run(data_dir, tiny_model_dir, tracking_uri, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft")
    cfg = SftConfig(max_steps=30, batch_size=8, learning_rate=1e-2, logging_steps=10, save_steps=30,
                    log_model=True, registered_model_name="router-test")
    with stage_run(tracking_uri, "router-tests", "sft", {}, {}) as run:  # what the `sft` stage opens
        return out, run_sft(cfg, data_dir, tiny_model_dir, out, run)


@pytest.fixture(scope="module")
def grpo_run(data_dir, sft_run, tracking_uri, tmp_path_factory):
    out = tmp_path_factory.mktemp("grpo")
    cfg = GrpoConfig(max_steps=3, prompts_per_step=2, logging_steps=1, save_steps=3, learning_rate=1e-3)
    with stage_run(tracking_uri, "router-tests", "grpo", {}, {}) as run:
        return out, run_grpo(cfg, data_dir, sft_run[0], out, run)


def test_sft_trains_and_saves_a_loadable_router(sft_run, tiny_model_dir):
    out, metrics = sft_run
    assert metrics["global_step"] == 30 and metrics["resumed_from"] is None
    assert changed(tiny_model_dir, out / "model")
    assert LMRouter(out / "model").candidates == ["large", "mid", "small"]  # the saved folder loads as a router


def test_grpo_moves_the_sft_weights(grpo_run, sft_run):
    out, metrics = grpo_run
    assert metrics["global_step"] == 3 and metrics["num_generations"] == 3  # the pool size
    assert changed(sft_run[0] / "model", out / "model")
    assert metrics["n_prompts"] == 12 * len(LAMBDAS)


def test_mlflow_has_named_runs_with_curves_and_the_registered_router(sft_run, grpo_run, tracking_uri):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("router-tests")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == ["grpo", "sft"]  # the trainers logged into the runs they were handed: no run of their own
    sft, grpo = runs["sft"], runs["grpo"]
    assert sft.data.tags["stage"] == "sft" and grpo.data.tags["lambdas"] == "0,2"
    assert len(client.get_metric_history(sft.info.run_id, "loss")) == 3  # steps 10, 20, 30
    for key in ("reward", "rewards/expected_correctness/mean", "rewards/energy_penalty/mean",
                "choices/small", "choices/invalid", "chosen_norm_energy/lam_0"):
        assert key in grpo.data.metrics, key
    shares = sum(grpo.data.metrics[f"choices/{c}"] for c in ("large", "mid", "small", "invalid"))
    assert shares == pytest.approx(1.0)
    versions = client.search_model_versions("name='router-test'")
    assert len(versions) == 1 and versions[0].run_id == sft.info.run_id


def test_registered_router_loads_and_routes_as_pyfunc(sft_run, tracking_uri):
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    model = mlflow.pyfunc.load_model("models:/router-test/1")
    frame = toy_tables()[1].head(4).assign(lam=[0.0, 2.0, 0.0, 2.0])
    router = LMRouter(sft_run[0] / "model")  # the registered model routes as the trained router does
    predicted = model.predict(frame)
    for lam, group in frame.reset_index(drop=True).groupby("lam"):
        assert [predicted[i] for i in group.index] == router.route(group, lam=lam).candidate_ids, lam


class KillAt(TrainerCallback):
    """Simulates a crash (process killed) right after a given step."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise RuntimeError("simulated kill")


class FirstStep(TrainerCallback):
    def __init__(self):
        self.first = None

    def on_step_end(self, args, state, control, **kwargs):
        self.first = self.first or state.global_step


class Bars:
    """A progress factory recording each bar's total and ticks (what the CLI draws with tqdm)."""

    def __init__(self):
        self.bars: dict[str, list[int]] = {}

    def __call__(self, total: int, label: str):
        self.bars[label] = [total, 0]
        return lambda n: self.bars[label].__setitem__(1, self.bars[label][1] + n)


def test_sft_resumes_from_the_last_checkpoint_after_a_kill(data_dir, tiny_model_dir, tmp_path):
    cfg = SftConfig(max_steps=4, batch_size=8, save_steps=2, logging_steps=2)
    with pytest.raises(RuntimeError, match="simulated kill"):
        run_sft(cfg, data_dir, tiny_model_dir, tmp_path, callbacks=[KillAt(3)])
    assert not (tmp_path / "model").exists()
    first, bars = FirstStep(), Bars()
    metrics = run_sft(cfg, data_dir, tiny_model_dir, tmp_path, callbacks=[first, StepProgress(bars, "SFT steps")],
                      progress=bars)
    assert metrics["resumed_from"].endswith("checkpoint-2")
    assert first.first == 3 and metrics["global_step"] == 4  # steps 1-2 were not redone
    assert bars.bars["SFT steps"] == [4, 4]  # the bar starts at the checkpoint's step and ends full
    total, ticked = bars.bars["trunk features"]
    assert total == len((data_dir / "train.jsonl").read_text().splitlines()) == ticked
    # a different training config must not pick up these checkpoints (DVC persists the folder)
    changed_cfg = cfg.model_copy(update={"learning_rate": 2e-5, "max_steps": 2})
    assert run_sft(changed_cfg, data_dir, tiny_model_dir, tmp_path)["resumed_from"] is None


def test_only_the_top_layers_train_when_asked(data_dir, tiny_model_dir, tmp_path):
    cfg = SftConfig(max_steps=2, batch_size=8, learning_rate=1e-2, save_steps=50, train_last_layers=1)
    metrics = run_sft(cfg, data_dir, tiny_model_dir, tmp_path)
    before = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).state_dict()
    after = AutoModelForCausalLM.from_pretrained(str(tmp_path / "model")).state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all(".layers.1." in k or k == "model.norm.weight" for k in moved)
    assert metrics["trainable_params"] < metrics["total_params"] and metrics["frozen_layers"] == 1


def test_a_finished_run_rerun_trains_no_step_and_keeps_its_weights(data_dir, sft_run, tmp_path):
    """A stage rerun for a dependency that does not change training (DVC keeps the checkpoints) finds its run's
    last checkpoint: the weights are taken as they are; resuming it trained one GRPO step more on every rerun."""
    from safetensors.torch import load_file

    cfg = GrpoConfig(max_steps=2, prompts_per_step=2, logging_steps=1, save_steps=1, learning_rate=1e-3)
    first = run_grpo(cfg, data_dir, sft_run[0], tmp_path)
    weights = load_file(tmp_path / "model" / "model.safetensors")
    steps = FirstStep()
    again = run_grpo(cfg, data_dir, sft_run[0], tmp_path, callbacks=[steps])
    assert first["global_step"] == again["global_step"] == 2 and again["resumed_from"].endswith("checkpoint-2")
    assert again["train_s"] == 0.0 and sorted(p.name for p in (tmp_path / "checkpoints").glob("checkpoint-*")) == \
        ["checkpoint-1", "checkpoint-2"]
    after = load_file(tmp_path / "model" / "model.safetensors")
    assert weights.keys() == after.keys() and all(torch.equal(weights[k], after[k]) for k in weights)
    assert steps.first is None


def test_a_finished_sft_run_rerun_trains_no_step_and_keeps_its_weights(data_dir, tiny_model_dir, tmp_path):
    """The same for SFT, whose trainer trains the top layers on cached trunk features."""
    from safetensors.torch import load_file

    cfg = SftConfig(max_steps=2, batch_size=8, save_steps=1, logging_steps=1, train_last_layers=1)
    first = run_sft(cfg, data_dir, tiny_model_dir, tmp_path)
    weights = load_file(tmp_path / "model" / "model.safetensors")
    steps = FirstStep()
    again = run_sft(cfg, data_dir, tiny_model_dir, tmp_path, callbacks=[steps])
    assert first["global_step"] == again["global_step"] == 2 and again["resumed_from"].endswith("checkpoint-2")
    after = load_file(tmp_path / "model" / "model.safetensors")
    assert weights.keys() == after.keys() and all(torch.equal(weights[k], after[k]) for k in weights)
    assert steps.first is None


def test_checkpoints_of_other_training_code_are_not_resumed(data_dir, tmp_path, monkeypatch):
    """DVC keeps the persisted checkpoints when the trainer's code changes: a rerun then trains anew."""
    from jouleroute.training import common

    cfg, inputs = SftConfig(max_steps=4), [data_dir / "train.jsonl"]
    assert common.resume_point(tmp_path, cfg, inputs) is None
    (tmp_path / common.CHECKPOINTS / "checkpoint-4").mkdir()
    assert common.resume_point(tmp_path, cfg, inputs).endswith("checkpoint-4")  # a killed run of this code
    monkeypatch.setattr(common, "training_code_fingerprint", lambda: "a trainer edited since")
    assert common.resume_point(tmp_path, cfg, inputs) is None
    assert not (tmp_path / common.CHECKPOINTS / "checkpoint-4").exists()
