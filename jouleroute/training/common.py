"""Shared plumbing for the sft and grpo stages: seeding, devices, checkpoints, saving."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase, Trainer, TrainerCallback, set_seed
from transformers.trainer_callback import PrinterCallback
from transformers.trainer_utils import get_last_checkpoint

from jouleroute.provenance import file_sha256
from jouleroute.training.config import LoraParams, Precision
from jouleroute.training.prompts import SPEC_FILE

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"  # trainer checkpoints (resume); under out_dir
MODEL = "model"  # final save_pretrained folder; under out_dir


def seed_everything(seed: int) -> None:
    """Python, NumPy and torch (CPU and CUDA) RNGs, in one call."""
    set_seed(seed)


def set_threads(threads: int | None) -> None:
    if threads is not None:
        torch.set_num_threads(threads)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch sees no CUDA GPU; use device: auto or cpu")
    return device


def use_bf16(precision: Precision, device: str) -> bool:
    """bf16 on CUDA under ``auto``; fp32 on CPU, where TRL's bf16 default fails or crawls."""
    return precision == "bf16" or (precision == "auto" and device == "cuda")


def load_tokenizer(model_path: str | Path, padding_side: str = "right") -> PreTrainedTokenizerBase:
    tokenizer = AutoTokenizer.from_pretrained(str(model_path), padding_side=padding_side)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


# Fields that do not change what is trained: editing them must not throw away checkpoints.
_NOT_TRAINING = {"logging_steps", "save_steps", "save_total_limit", "threads", "log_model",
                 "registered_model_name"}


def resume_point(out_dir: Path, cfg: Any, inputs: list[Path]) -> str | None:
    """The newest ``checkpoint-N`` under ``out_dir/checkpoints`` to resume a killed run, if any.

    Checkpoints are only reused by the same training: the config (minus logging and saving
    knobs) and the input files are fingerprinted into ``checkpoints/run_key.json``. A DVC
    ``persist`` out keeps old checkpoints across param changes; without this check a rerun
    with, say, a new λ grid would "resume" a finished run and return the old model.
    """
    folder = Path(out_dir) / CHECKPOINTS
    config = {k: v for k, v in cfg.model_dump(mode="json").items() if k not in _NOT_TRAINING}
    key = hashlib.sha256(json.dumps({"config": config, "inputs": [file_sha256(Path(p)) for p in inputs]},
                                    sort_keys=True).encode()).hexdigest()
    marker = folder / "run_key.json"
    if folder.is_dir():
        previous = json.loads(marker.read_text()).get("key") if marker.is_file() else None
        if previous != key:
            log.warning("%s holds checkpoints of a different config or data: starting over", folder)
            shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"key": key, "config": config}, indent=2, sort_keys=True))
    return get_last_checkpoint(str(folder))


_LAYER = re.compile(r"\.layers\.(\d+)\.")


def train_top_layers_only(model: Any, last_layers: int | None) -> dict[str, int]:
    """Freeze the embeddings and all but the top ``last_layers`` decoder layers.

    Backpropagation then stops at the first trainable layer: with 4 of SmolLM2's 30
    layers a step costs ~1.3 forward passes instead of ~3, which is what makes SFT and
    GRPO fit a 2-core CPU budget. ``None`` trains everything (the GPU setting). Works on
    plain and LoRA-wrapped models (parameters are matched by their ``.layers.<i>.`` name).
    The optimizer is built at ``train()``, so calling this after the trainer is made is fine.
    """
    total = model.config.num_hidden_layers
    if last_layers is not None:
        first_trained = max(total - last_layers, 0)
        for name, param in model.named_parameters():
            match = _LAYER.search(name)
            if (match is None and "embed" in name) or (match is not None and int(match.group(1)) < first_trained):
                param.requires_grad_(False)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"trainable_params": trainable, "total_params": sum(p.numel() for p in model.parameters())}


def lora_config(params: LoraParams | None):
    if params is None:
        return None
    from peft import LoraConfig  # peft only matters when LoRA is on

    targets = params.target_modules if isinstance(params.target_modules, str) else list(params.target_modules)
    return LoraConfig(r=params.r, lora_alpha=params.alpha, lora_dropout=params.dropout,
                      target_modules=targets, task_type="CAUSAL_LM")


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


def quiet_trainer(trainer: Trainer) -> Trainer:
    """Swap transformers' stdout PrinterCallback (used when tqdm is off) for logging."""
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(LogLinesCallback())
    return trainer


def train_and_save(trainer: Trainer, cfg: Any, tokenizer: PreTrainedTokenizerBase, out_dir: Path, spec_dir: Path,
                   resume: str | None, mlflow: Any, stage: str) -> tuple[dict[str, Any], Path]:
    """Freeze as configured, train (resuming when a checkpoint exists), save ``out_dir/model``."""
    sizes = train_top_layers_only(trainer.model, cfg.train_last_layers)
    if mlflow is not None:
        mlflow.log_params(sizes)
    if resume:
        log.info("%s: resuming from %s", stage, resume)
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    train_s = time.perf_counter() - started
    model_dir = save_final_model(trainer.model, tokenizer, out_dir, spec_dir)
    log.info("%s: %d steps in %.1f s, loss %.4f", stage, trainer.state.global_step, train_s, result.training_loss)
    return {"train_loss": float(result.training_loss), "global_step": int(trainer.state.global_step),
            "train_s": train_s, "resumed_from": resume, **sizes}, model_dir


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
