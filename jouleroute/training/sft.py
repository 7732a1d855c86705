"""Stage ``sft``: teach the base LM to name the label candidate (TRL SFTTrainer).

Reads ``data_dir/sft.jsonl`` (conversational prompt/completion rows from router_data),
trains with the loss on the completion only, checkpoints under ``out_dir/checkpoints``
(a killed run resumes from the newest one), and saves the router to ``out_dir/model``
(LoRA merged; tokenizer and router_spec.json alongside). SFT depends only on the
router_data λ grid, never on ``grpo.lambdas``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from transformers import TrainerCallback

from jouleroute.training.common import (
    load_tokenizer, lora_config, quiet_trainer, resolve_device, resume_point, seed_everything, set_threads,
    train_and_save, trainer_kwargs, write_json,
)
from jouleroute.training.config import SftConfig
from jouleroute.training.mlflow_log import MlflowMetricsCallback, log_stage_end, stage_run

log = logging.getLogger(__name__)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with Path(path).open() as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}: line {number} is not valid JSON ({err.msg})") from None
    if not rows:
        raise ValueError(f"{path} has no rows; run the router_data stage first")
    return rows


def check_lengths(tokenizer, rows: list[dict[str, Any]], max_length: int, source: Path) -> dict[str, float]:
    """Token lengths of prompt+completion; a row over ``max_length`` is an error, not a silent cut.

    TRL would truncate from the end, i.e. drop the label, and then silently discard the
    example as fully masked.
    """
    lengths = []
    for number, row in enumerate(rows, start=1):
        encoded = tokenizer.apply_chat_template(row["prompt"] + row["completion"], tokenize=True)
        length = len(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)
        if length > max_length:
            raise ValueError(f"{source}: row {number} (query_id={row.get('query_id')}) is {length} tokens, over "
                             f"sft.max_length={max_length}; raise sft.max_length or lower "
                             "router_data.max_question_chars")
        lengths.append(length)
    return {"max_tokens": max(lengths), "mean_tokens": sum(lengths) / len(lengths)}


def _weights(model: str | Path) -> list[Path]:
    """The base model's weight files (fingerprinted for resume); none for a hub id."""
    folder = Path(model)
    return sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) if folder.is_dir() else []


def run_sft(cfg: SftConfig, data_dir: Path, base_model_dir: str | Path, out_dir: Path,
            tracking_uri: str | None = None, *, callbacks: Sequence[TrainerCallback] = ()) -> dict:
    """Fine-tune ``base_model_dir`` (a local folder or hub id) on sft.jsonl; returns metrics."""
    seed_everything(cfg.seed)
    set_threads(cfg.threads)
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer  # slow import (~12 s): keep it out of module import

    data_dir, out_dir = Path(data_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = read_jsonl(data_dir / "sft.jsonl")
    for number, row in enumerate(rows, start=1):
        if not isinstance(row.get("prompt"), list) or not isinstance(row.get("completion"), list):
            raise ValueError(f"{data_dir / 'sft.jsonl'}: row {number} needs 'prompt' and 'completion' message lists")
    dataset = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in rows])
    device = resolve_device(cfg.device)
    args = SFTConfig(
        **trainer_kwargs(cfg, out_dir, device, run_name="sft"),
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        max_length=cfg.max_length,
        completion_only_loss=True,
        packing=False,
        model_init_kwargs={"dtype": "float32"},  # mixed precision (bf16) keeps fp32 master weights
    )
    tokenizer = load_tokenizer(base_model_dir)
    lengths = check_lengths(tokenizer, rows, cfg.max_length, data_dir / "sft.jsonl")
    resume = resume_point(out_dir, cfg, [data_dir / "sft.jsonl", *_weights(base_model_dir)])
    labels = Counter(r.get("label") for r in rows)
    params = {**cfg.model_dump(), "base_model_dir": str(base_model_dir), "n_rows": len(rows), "device": device,
              "lambdas": sorted({r.get("lam") for r in rows}), "resumed_from": resume or ""}
    with stage_run(tracking_uri, "sft", params, {"base_model": str(base_model_dir)}) as mlflow:
        trainer = quiet_trainer(SFTTrainer(
            model=str(base_model_dir), args=args, train_dataset=dataset, processing_class=tokenizer,
            peft_config=lora_config(cfg.lora), callbacks=[MlflowMetricsCallback(mlflow), *callbacks]))
        metrics, model_dir = train_and_save(trainer, cfg, tokenizer, out_dir, data_dir, resume, mlflow, "sft")
        metrics.update(n_rows=len(rows), device=device, **lengths,
                       label_counts=dict(sorted(labels.items(), key=lambda kv: str(kv[0]))))
        log_stage_end(mlflow, "sft", metrics, model_dir, cfg)
    write_json(out_dir / "metrics.json", metrics)
    return metrics
