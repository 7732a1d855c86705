"""Loading the router LM for training: tokenizer, label tokens, trunk split and cached features.

Shared by the sft and grpo stages. Trunk features are cached on disk under a key that
covers the frozen weights and the exact prompts (``TrunkSplit.fingerprint``): GRPO, which
freezes the same layers as SFT, reads the features SFT computed instead of recomputing them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import AutoModelForCausalLM

from jouleroute.routing.lm.spec import RouterSpec, label_token_ids, prompt_ids
from jouleroute.torch_env import load_tokenizer, resolve_device
from jouleroute.training.policy import PolicyCache
from jouleroute.training.trunk import TrunkSplit, keep_first_layers

log = logging.getLogger(__name__)


@dataclass
class RouterTrainingSetup:
    model: Any
    tokenizer: Any
    spec: RouterSpec
    split: TrunkSplit
    label_ids: list[int]
    features: list[torch.Tensor]
    features_s: float  # wall time spent computing features (0 when read from the cache)
    device: str


def load_setup(model_dir: str | Path, spec: RouterSpec, rows: Sequence[dict], train_last_layers: int | None,
               device_name: str, cache_dir: Path | None, progress=None,
               keep_layers: int | None = None) -> RouterTrainingSetup:
    """The router LM from ``model_dir``, its first ``keep_layers`` decoder layers kept (None: all), cut at
    ``train_last_layers``, with features for ``rows``' questions.
    ``progress(total, label) -> tick``: a bar while features are computed (not when read from the cache)."""
    device = resolve_device(device_name)
    tokenizer = load_tokenizer(model_dir)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model = keep_first_layers(model, keep_layers).to(device)
    labels = label_token_ids(tokenizer, spec.labels, spec.candidates)
    split = TrunkSplit(model, train_last_layers)
    prompts = [prompt_ids(spec, tokenizer, r["question"], r["task"]) for r in rows]
    started = time.perf_counter()
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"trunk-{split.fingerprint(prompts)}.pt"
        if path.is_file():
            log.info("trunk features read from %s", path)
            return RouterTrainingSetup(model, tokenizer, spec, split, labels, torch.load(path), 0.0, device)
    log.info("computing trunk features for %d prompts (%d frozen layers)", len(prompts), split.n_frozen)
    tick = progress(len(prompts), "trunk features") if progress is not None else None
    features = split.features(prompts, pad_id=tokenizer.pad_token_id, progress=tick)
    elapsed = time.perf_counter() - started
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".tmp")
        torch.save(features, partial)
        partial.replace(path)  # atomic: a killed run never leaves a truncated cache behind
    return RouterTrainingSetup(model, tokenizer, spec, split, labels, features, elapsed, device)


def policy_cache(setup: RouterTrainingSetup, rows: Sequence[dict], temperature: float = 1.0) -> PolicyCache:
    energy = torch.tensor([setup.spec.energy_row(r["task"]) for r in rows], dtype=torch.float32)
    return PolicyCache(split=setup.split, features=setup.features, energy=energy, label_ids=setup.label_ids,
                       utility_scale=setup.spec.utility_scale, temperature=temperature)


def marked_prompt(setup: RouterTrainingSetup, row: dict, marker: str) -> str:
    """The rendered prompt plus a row marker: a key TRL's token ids can be traced back with, never read by the model."""
    from jouleroute.routing.lm.spec import prompt_text

    return prompt_text(setup.spec, setup.tokenizer, row["question"], row["task"]) + f"\n#{marker}"
