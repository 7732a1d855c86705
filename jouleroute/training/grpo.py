"""Stage ``grpo``: sharpen the SFT router with GRPO on the reward of each choice (TRL GRPOTrainer).

Each train query of ``grpo.jsonl`` is crossed with ``cfg.lambdas``: the prompt states λ
and the ``energy_penalty`` reward uses the row's λ, so one checkpoint learns the whole
accuracy–energy trade-off. The exact training set is written to
``out_dir/grpo_train.jsonl``. Besides TRL's own logs (loss, reward, each
``rewards/<name>/mean``, ``kl``), the share of completions naming each candidate is
logged as ``choices/<candidate>`` and the mean normalized energy of the chosen
candidate per λ as ``chosen_norm_energy/lam_<λ>``.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from transformers import TrainerCallback

from jouleroute.training.common import (
    MODEL, load_tokenizer, lora_config, quiet_trainer, resolve_device, resume_point, seed_everything,
    set_threads, train_and_save, trainer_kwargs, write_json,
)
from jouleroute.training.config import GrpoConfig
from jouleroute.training.mlflow_log import MlflowMetricsCallback, log_stage_end, stage_run
from jouleroute.training.prompts import RouterSpec, build_prompt, format_lambda, parse_choice
from jouleroute.training.rewards import build_rewards
from jouleroute.training.sft import read_jsonl
from jouleroute.training.utility import normalize_energy

log = logging.getLogger(__name__)


def grpo_rows(spec: RouterSpec, base_rows: list[dict[str, Any]], lambdas: Sequence[float], source: Path) -> list[dict]:
    """One GRPO prompt per (train query, λ), carrying every candidate's outcome for the rewards."""
    expected = set(spec.candidates)
    rows = []
    for number, row in enumerate(base_rows, start=1):
        for column in ("correct_by_candidate", "energy_by_candidate"):
            if set(row.get(column) or {}) != expected:
                raise ValueError(f"{source}: row {number} (query_id={row.get('query_id')}): field '{column}' must "
                                 f"cover exactly the candidates {sorted(expected)}")
        for lam in lambdas:
            rows.append({
                "prompt": build_prompt(spec, row["question"], row["task"], lam), "lam": float(lam),
                "query_id": row["query_id"], "task": row["task"],
                # JSON strings: datasets would otherwise turn the dicts into fixed structs
                "correct_by_candidate": json.dumps(row["correct_by_candidate"], sort_keys=True),
                "energy_by_candidate": json.dumps(row["energy_by_candidate"], sort_keys=True),
            })
    return rows


def track_choices(reward: Callable, candidates: list[str], energy_norm: str) -> Callable:
    """Wrap a reward so each call also logs the candidate distribution (via TRL's ``log_metric``)."""

    def tracked(completions, log_metric=None, **columns):
        if log_metric is not None:
            picks = [parse_choice(c, candidates) for c in completions]
            counts = Counter(p or "invalid" for p in picks)
            for cid in [*candidates, "invalid"]:
                log_metric(f"choices/{cid}", counts.get(cid, 0) / len(picks))
            by_lam: dict[str, list[float]] = defaultdict(list)
            for pick, lam, energy in zip(picks, columns["lam"], columns["energy_by_candidate"]):
                normed = normalize_energy(json.loads(energy) if isinstance(energy, str) else energy, energy_norm)
                by_lam[format_lambda(lam)].append(normed[pick] if pick else 1.0)
            for lam, values in by_lam.items():
                log_metric(f"chosen_norm_energy/lam_{lam}", sum(values) / len(values))
        return reward(completions, **columns)

    tracked.__name__ = reward.__name__
    return tracked


def run_grpo(cfg: GrpoConfig, data_dir: Path, sft_dir: Path, out_dir: Path, tracking_uri: str | None = None,
             *, callbacks: Sequence[TrainerCallback] = ()) -> dict:
    """GRPO from ``sft_dir/model`` on grpo.jsonl x ``cfg.lambdas``; saves ``out_dir/model``; returns metrics."""
    seed_everything(cfg.seed)
    set_threads(cfg.threads)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer  # slow import (~12 s): keep it out of module import

    data_dir, sft_model, out_dir = Path(data_dir), Path(sft_dir) / MODEL, Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = RouterSpec.load(sft_model)
    if spec.energy_norm != cfg.energy_norm:
        log.warning("grpo.energy_norm=%s differs from router_data.energy_norm=%s: the reward and the SFT labels "
                    "rank candidates on different scales", cfg.energy_norm, spec.energy_norm)
    rows = grpo_rows(spec, read_jsonl(data_dir / "grpo.jsonl"), cfg.lambdas, data_dir / "grpo.jsonl")
    with (out_dir / "grpo_train.jsonl").open("w") as handle:
        handle.writelines(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    funcs, weights = build_rewards(cfg.rewards, cfg.energy_norm)
    funcs[0] = track_choices(funcs[0], spec.candidates, cfg.energy_norm)
    device = resolve_device(cfg.device)
    args = GRPOConfig(
        **trainer_kwargs(cfg, out_dir, device, run_name="grpo"),
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        num_generations=cfg.num_generations,
        max_completion_length=cfg.max_completion_length,
        temperature=cfg.temperature,
        beta=cfg.beta,
        reward_weights=weights,
        model_init_kwargs={"dtype": "float32"},
        log_completions=False,
    )
    tokenizer = load_tokenizer(sft_model, padding_side="left")
    resume = resume_point(out_dir, cfg, [data_dir / "grpo.jsonl", *sorted(sft_model.glob("*.safetensors"))])
    params = {**cfg.model_dump(), "sft_model": str(sft_model), "n_prompts": len(rows), "device": device,
              "candidates": spec.candidates, "resumed_from": resume or ""}
    with stage_run(tracking_uri, "grpo", params, {"lambdas": ",".join(format_lambda(x) for x in cfg.lambdas)}) as mlflow:
        trainer = quiet_trainer(GRPOTrainer(
            model=str(sft_model), reward_funcs=funcs, args=args, train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer, peft_config=lora_config(cfg.lora),
            callbacks=[MlflowMetricsCallback(mlflow), *callbacks]))
        metrics, model_dir = train_and_save(trainer, cfg, tokenizer, out_dir, sft_model, resume, mlflow, "grpo")
        metrics.update(n_prompts=len(rows), device=device, **_reward_trend(trainer.state.log_history))
        log_stage_end(mlflow, "grpo", metrics, model_dir, cfg)
    write_json(out_dir / "metrics.json", metrics)
    return metrics


def _reward_trend(history: list[dict[str, Any]]) -> dict[str, Any]:
    """First and last logged reward / choice shares, for the stage's metrics.json."""
    logged = [h for h in history if "reward" in h]
    if not logged:
        return {}
    first, last = logged[0], logged[-1]
    keep = [k for k in last if k == "reward" or k.startswith(("rewards/", "choices/", "kl"))]
    return {"first_log": {k: first.get(k) for k in keep}, "last_log": {k: last.get(k) for k in keep}}
