"""Shared plumbing for the sft and grpo stages: seeding, devices, checkpoints, saving."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase, Trainer, TrainerCallback
from transformers.trainer_callback import PrinterCallback
from transformers.trainer_utils import get_last_checkpoint

from jouleroute.provenance import file_sha256, seed_everything  # noqa: F401 (re-exported)
from jouleroute.routing.lm.spec import SPEC_FILE
from jouleroute.torch_env import load_tokenizer, resolve_device, set_threads, use_bf16  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"  # trainer checkpoints (resume); under out_dir
MODEL = "model"  # final save_pretrained folder; under out_dir


# Fields that do not change what is trained: editing them must not throw away checkpoints.
_NOT_TRAINING = {"logging_steps", "save_steps", "save_total_limit", "threads", "log_model",
                 "registered_model_name", "keep_best_on_val"}


def resume_point(out_dir: Path, cfg: Any, inputs: list[Path]) -> str | None:
    """The newest ``checkpoint-N`` under ``out_dir/checkpoints`` to resume a killed run, if any.

    Checkpoints are only reused by the same training: the config (minus logging and saving
    knobs), the input files and the training code (``training_code_fingerprint``) are
    fingerprinted into ``checkpoints/run_key.json``. A DVC ``persist`` out keeps old checkpoints
    across param and code changes; without this check a rerun with, say, a new λ grid or a fixed
    trainer would "resume" a finished run and return the old model.
    """
    folder = Path(out_dir) / CHECKPOINTS
    config = {k: v for k, v in cfg.model_dump(mode="json").items() if k not in _NOT_TRAINING}
    key = hashlib.sha256(json.dumps({"config": config, "inputs": [file_sha256(Path(p)) for p in inputs],
                                     "code": training_code_fingerprint()}, sort_keys=True).encode()).hexdigest()
    marker = folder / "run_key.json"
    if folder.is_dir():
        previous = json.loads(marker.read_text()).get("key") if marker.is_file() else None
        if previous != key:
            log.warning("%s holds checkpoints of a different config or data: starting over", folder)
            shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"key": key, "config": config}, indent=2, sort_keys=True))
    return get_last_checkpoint(str(folder))


def training_code_fingerprint() -> str:
    """A hash of the code that decides what is trained: this package (training/), the LM router (routing/lm/)
    and the device helpers. A checkpoint of other code is not resumed."""
    import jouleroute

    root = Path(jouleroute.__file__).parent
    files = sorted([*(root / "training").glob("*.py"), *(root / "routing" / "lm").glob("*.py"), root / "torch_env.py"])
    return hashlib.sha256(b"".join(f.relative_to(root).as_posix().encode() + file_sha256(f).encode()
                                   for f in files)).hexdigest()


def trainer_kwargs(cfg: Any, out_dir: Path, device: str, run_name: str) -> dict[str, Any]:
    """TrainingArguments shared by SFT and GRPO (CPU-safe; bf16 only on CUDA under precision=auto)."""
    return dict(
        output_dir=str(Path(out_dir) / CHECKPOINTS),
        run_name=run_name,
        seed=cfg.seed,
        learning_rate=cfg.learning_rate,
        max_steps=cfg.max_steps,
        logging_steps=cfg.logging_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        bf16=use_bf16(cfg.precision, device),
        use_cpu=device == "cpu",
        dataloader_pin_memory=False,
        activation_checkpointing=False,  # 135M fits easily; checkpointing only costs time
        report_to="none",  # MLflow is logged by our own callback, into the stage's named run
        disable_tqdm=True,  # progress bars belong to the CLI layer
        save_only_model=False,  # optimizer + RNG state are what make resume exact
    )


class LogLinesCallback(TrainerCallback):
    """Trainer log lines go to this module's logger instead of stdout (library code never prints)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs:
            shown = {k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in logs.items()
                     if k in ("loss", "reward", "kl", "learning_rate", "epoch")
                     or (k.startswith("rewards/") and k.endswith("/mean"))}
            log.info("step %d: %s", state.global_step, shown)


class StepProgress(TrainerCallback):
    """Training steps on the caller's progress bar (``progress(total, label) -> tick``); a resumed run starts
    the bar at its checkpoint's step. The library never draws bars itself (trainer tqdm is off)."""

    def __init__(self, progress, label: str):
        self.progress, self.label, self.tick = progress, label, None

    def on_train_begin(self, args, state, control, **kwargs):
        self.tick = self.progress(int(state.max_steps), self.label)
        if state.global_step:
            self.tick(int(state.global_step))

    def on_step_end(self, args, state, control, **kwargs):
        if self.tick is not None:
            self.tick(1)


def finished(checkpoint: str | None) -> bool:
    """Whether ``checkpoint`` is the last step of its run: a finished run DVC's ``persist`` kept, not a killed one
    (the stage reran for a dependency that does not change what is trained)."""
    if not checkpoint:
        return False
    state = json.loads((Path(checkpoint) / "trainer_state.json").read_text())
    return int(state.get("max_steps") or 0) > 0 and int(state["global_step"]) >= int(state["max_steps"])


def take_finished(trainer: Trainer, checkpoint: str) -> dict[str, Any]:
    """The finished run's weights and state, as they are: resuming it would train one step more on every rerun
    (transformers' loop steps once before it checks the end), and a rerun must give what a fresh run gives."""
    from transformers.trainer_callback import TrainerState

    trainer._load_from_checkpoint(checkpoint)
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json"))
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    log.info("%s is this training's last step (%d): its weights are taken, no step is trained again", checkpoint,
             trainer.state.global_step)
    return {"train_loss": float(sum(losses) / len(losses)) if losses else float("nan"),
            "global_step": int(trainer.state.global_step), "train_s": 0.0, "resumed_from": checkpoint}


def train_timed(trainer: Trainer, resume: str | None) -> dict[str, Any]:
    """``trainer.train()`` (resumed from ``resume`` when given): loss, steps and wall seconds. A ``resume`` that
    is its run's last step is taken as it is (``take_finished``); its loss is the mean of the logged losses."""
    import time

    if finished(resume):
        return take_finished(trainer, resume)
    if resume:
        log.info("resuming from %s", resume)
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - started
    log.info("%d steps in %.1f s, loss %.4f", trainer.state.global_step, seconds, result.training_loss)
    return {"train_loss": float(result.training_loss), "global_step": int(trainer.state.global_step),
            "train_s": seconds, "resumed_from": resume}


def quiet_trainer(trainer: Trainer) -> Trainer:
    """Swap transformers' stdout PrinterCallback (used when tqdm is off) for logging."""
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(LogLinesCallback())
    return trainer


def save_final_model(model: Any, tokenizer: PreTrainedTokenizerBase, out_dir: Path, spec_dir: Path) -> Path:
    """``out_dir/model``: plain transformers weights (LoRA merged), tokenizer and router_spec.json.

    Merging keeps the folder loadable by transformers and vLLM without peft.
    """
    target = Path(out_dir) / MODEL
    if target.exists():
        shutil.rmtree(target)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    shutil.copy(Path(spec_dir) / SPEC_FILE, target / SPEC_FILE)
    return target


def write_json(path: Path, payload: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(payload, indent=2, sort_keys=True, default=str))
