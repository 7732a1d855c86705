"""Stage ``sft``: teach the router LM each train query's best candidate at every λ (TRL SFTTrainer).

Reads ``data_dir/train.jsonl`` (router_data). One SFT row per train query carries its labels
at every λ of the trained grid; the row's log-likelihood is the mean over the grid of
``log π_λ(label_λ | x)``, with ``π_λ = softmax(z(x) − λ·s·ê)`` (``training.policy``), so one
pass per query teaches the whole accuracy–energy curve. Only the top ``train_last_layers``
layers train, on trunk features computed once (``training.trunk``). Checkpoints go under
``out_dir/checkpoints`` (a killed run resumes from the newest one); the router is saved to
``out_dir/model`` (tokenizer and router_spec.json alongside).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import TrainerCallback

from jouleroute.routing.lm.spec import RouterSpec, format_lambda
from jouleroute.routing.scores import normalize_energy_map, utility
from jouleroute.training.common import (
    quiet_trainer, resume_point, save_final_model, seed_everything, set_threads, trainer_kwargs, train_timed,
    write_json,
)
from jouleroute.tracking import StageRun
from jouleroute.training.config import SftConfig
from jouleroute.training.mlflow_log import MlflowMetricsCallback, log_stage_end, log_stage_start
from jouleroute.training.partial_feedback import PROFILED_FILE, profiled_ids, write_profiled
from jouleroute.training.policy import attach_policy, detach_policy, release_fused_head
from jouleroute.training.router_data import UNPROFILED
from jouleroute.training.router_model import load_setup, marked_prompt, policy_cache

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


def label_targets(spec: RouterSpec, rows: Sequence[dict], source: Path) -> torch.Tensor:
    """[queries, grid] index of each query's label at each λ of the spec's grid."""
    index = {c: i for i, c in enumerate(spec.candidates)}
    targets = []
    for number, row in enumerate(rows, start=1):
        labels = row.get("labels") or {}
        try:
            targets.append([index[labels[format_lambda(lam)]] for lam in spec.lambdas])
        except KeyError as err:
            raise ValueError(f"{source}: row {number} (query_id={row.get('query_id')}): field 'labels' lacks λ or "
                             f"names an unknown candidate ({err}); rerun router_data") from None
    return torch.tensor(targets, dtype=torch.long)


def soft_targets(spec: RouterSpec, rows: Sequence[dict], source: Path) -> torch.Tensor:
    """[queries, grid, candidates]: ``softmax_c(s · (p̂_c − λ·ê_c))`` per query and λ of the grid.

    ``p̂`` is the query's outcome shrunk toward the task prior (router_data's
    ``expected_correct_by_candidate``), ``ê`` its per-query normalized energy, ``s`` the spec's
    ``utility_scale``. The decision rule's policy ``softmax(z − λ·s·ê)`` matches these targets
    exactly when ``z = s·p̂``: the logits learn each candidate's success on the utility scale,
    so λ trades against them as it should. Hard argmax labels instead push the logits apart
    without bound, and the λ term then barely moves the choice.
    """
    out = torch.zeros((len(rows), len(spec.lambdas), len(spec.candidates)))
    for i, row in enumerate(rows):
        p = row.get("expected_correct_by_candidate")
        if p is None or set(p) != set(spec.candidates):
            raise ValueError(f"{source}: row {i + 1} (query_id={row.get('query_id')}): field "
                             "'expected_correct_by_candidate' must cover every candidate; rerun router_data")
        energy = normalize_energy_map(row["energy_by_candidate"], spec.energy_norm)
        prob = torch.tensor([float(p[c]) for c in spec.candidates])
        cost = torch.tensor([energy[c] for c in spec.candidates])
        for j, lam in enumerate(spec.lambdas):
            out[i, j] = torch.softmax(spec.utility_scale * utility(prob, cost, lam), dim=0)
    return out


def _weights(model: str | Path) -> list[Path]:
    """The base model's weight files (fingerprinted for resume); none for a hub id."""
    folder = Path(model)
    return sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")) if folder.is_dir() else []


def run_sft(cfg: SftConfig, data_dir: Path, base_model_dir: str | Path, out_dir: Path,
            run: StageRun | None = None, *, share: float = 1.0, share_seed: int = 0,
            callbacks: Sequence[TrainerCallback] = (), cache_dir: Path | None = None, progress=None) -> dict:
    """Fine-tune ``base_model_dir`` (a local folder or hub id) on train.jsonl; returns metrics. ``run``: the
    MLflow run the caller opened (the `sft` stage's), which gets the params and the training curves.
    ``share`` of each task's train queries, drawn with ``share_seed`` (``sampling.profiled_ids``), are the ones
    with a full profile that SFT fits (the pipeline's: ``tournament.train_fraction`` and ``tournament.seed``);
    GRPO's partial feedback learns on the rest."""
    seed_everything(cfg.seed)
    set_threads(cfg.threads)
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer  # slow import (~12 s): keep it out of module import

    data_dir, out_dir = Path(data_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source = data_dir / "train.jsonl"
    rows = read_jsonl(source)
    # when router_data listed unprofiled train queries, the tournament already ran only this share
    # (grpo.reward_source: live), so every row of train.jsonl is SFT's; otherwise the share is drawn here
    drawn = 1.0 if (data_dir / UNPROFILED).is_file() else share
    profiled = set(profiled_ids(rows, drawn, share_seed))
    rows = [r for r in rows if str(r["query_id"]) in profiled]
    write_profiled(out_dir, [r["query_id"] for r in rows], share, share_seed)  # GRPO and budget read it
    spec = RouterSpec.load(data_dir)
    targets = label_targets(spec, rows, source)
    fit = soft_targets(spec, rows, source) if cfg.targets == "soft" else targets
    setup = load_setup(base_model_dir, spec, rows, cfg.train_last_layers, cfg.device, cache_dir, progress,
                       keep_layers=cfg.router_layers)
    cache = policy_cache(setup, rows)
    cache.sft_lambdas, cache.sft_targets = torch.tensor(spec.lambdas, dtype=torch.float32), fit
    examples = []
    for i, row in enumerate(rows):
        ids = setup.tokenizer(marked_prompt(setup, row, str(i)), add_special_tokens=False)["input_ids"]
        cache.register(ids, i, 0.0)
        action = setup.label_ids[int(targets[i, 0])]  # a placeholder: the loss reads every λ's label
        examples.append({"input_ids": ids + [action], "completion_mask": [0] * len(ids) + [1]})
    args = SFTConfig(
        **trainer_kwargs(cfg, out_dir, setup.device, run_name="sft"),
        num_train_epochs=cfg.epochs, per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum, max_length=None, completion_only_loss=True, packing=False,
    )
    resume = resume_point(out_dir, cfg, [source, data_dir / "router_spec.json", out_dir / PROFILED_FILE,
                                         *_weights(base_model_dir)])
    facts = {"base_model": str(base_model_dir), "n_queries": len(rows), "device": setup.device,
             "lambdas": ",".join(format_lambda(x) for x in spec.lambdas), "resumed_from": resume or "",
             **{f"split.{k}": v for k, v in setup.split.sizes().items()}}
    model = attach_policy(setup.model, cache)
    log_stage_start(run, facts)
    trainer = quiet_trainer(SFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(examples), processing_class=setup.tokenizer,
        callbacks=[MlflowMetricsCallback(run), *callbacks]))
    release_fused_head(model)
    metrics = train_timed(trainer, resume)
    detach_policy(model)
    model_dir = save_final_model(model, setup.tokenizer, out_dir, data_dir)
    metrics.update(n_queries=len(rows), device=setup.device, trunk_features_s=setup.features_s,
                   **setup.split.sizes(), train_label_agreement=_agreement(cache, targets))
    log_stage_end(run, "sft", metrics, model_dir, cfg)
    write_json(out_dir / "metrics.json", metrics)
    return metrics


@torch.no_grad()
def _agreement(cache, targets: torch.Tensor) -> dict[str, float]:
    """Share of train queries whose decision at each λ equals its label (fit, not generalization)."""
    z = torch.cat([cache.logits(list(range(s, min(s + 64, len(targets)))))
                   for s in range(0, len(targets), 64)])
    out = {}
    for j, lam in enumerate(cache.sft_lambdas.tolist()):
        chosen = utility(z, cache.energy, lam, cache.utility_scale).argmax(dim=-1)
        out[format_lambda(lam)] = float((chosen == targets[:, j]).float().mean())
    return out
