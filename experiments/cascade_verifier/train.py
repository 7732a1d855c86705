"""Train the verifier with the router's recipe, calling the library: router_data -> SFT -> GRPO.

The derived profile (``derived``) goes through ``training.router_data.run_router_data`` (labels on TRAIN, val rows
for the check), ``training.sft.run_sft`` and ``training.grpo.run_grpo`` unchanged; GRPO's reward is the router's,
correctness − λ · normalised joules of the choice, and an escalation's joules are both calls'. As in the grpo
stage, GRPO's weights are kept only when they do not lower the mean val utility over the λ grid
(``evaluation.label_eval.label_accuracy``); both figures are reported.

``score`` reads queries with ``routing.lm.router.LMRouter`` under the project's meter (``energy.make_meter``: Zeus
where a counter is readable, else the CPU-time estimate labelled ``estimated``) and returns each query's margin
``(z_escalate − z_accept) / s`` (utility units: escalate when it exceeds the threshold) and its own joules.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from jouleroute.energy import make_meter
from jouleroute.energy.config import EnergyConfig
from jouleroute.evaluation.label_eval import label_accuracy, load_rows
from jouleroute.routing.lm.config import RouterConfig
from jouleroute.routing.lm.router import LMRouter
from jouleroute.training.common import MODEL
from jouleroute.training.config import RouterDataConfig
from jouleroute.training.grpo import run_grpo
from jouleroute.training.router_data import run_router_data
from jouleroute.training.sft import run_sft

from experiments.cascade_verifier.config import ACCEPT, ESCALATE, VerifierConfig

log = logging.getLogger(__name__)


def router_data_config(cfg: VerifierConfig) -> RouterDataConfig:
    """router_data's settings for the verifier: its λ grid and token budget; no scaffold stripping (the text
    is composed here, so a shared prefix is the composition's, not the task's)."""
    return RouterDataConfig(lambdas=cfg.lambdas, label_policy=cfg.label_policy, prior_strength=cfg.prior_strength,
                            max_query_tokens=cfg.max_query_tokens, strip_scaffold=False, seed=cfg.seed)


def _val_utility(model_dir: Path, data_dir: Path, cfg: VerifierConfig) -> float:
    router = LMRouter(model_dir, meter=None, cfg=RouterConfig(threads=cfg.router_threads))
    result = label_accuracy(router, load_rows(data_dir / "val.jsonl"), energy_norm="max",
                            train_rows=load_rows(data_dir / "train.jsonl"))
    return float(result["overall"]["router_utility"])


def train_verifier(profile: pd.DataFrame, queries: pd.DataFrame, cfg: VerifierConfig, base_model_dir: Path,
                   work_dir: Path) -> dict:
    """Train on the derived tables; returns the kept model folder and the training figures."""
    work_dir = Path(work_dir)
    data_dir, sft_dir, grpo_dir, cache = (work_dir / n for n in ("router_data", "sft", "grpo", "cache"))
    stats = run_router_data(profile, queries, router_data_config(cfg), data_dir)
    started = time.perf_counter()
    sft = run_sft(cfg.sft, data_dir, base_model_dir, sft_dir, cache_dir=cache)
    sft_s = time.perf_counter() - started
    started = time.perf_counter()
    grpo = run_grpo(cfg.grpo, data_dir, sft_dir, grpo_dir, cache_dir=cache, prior_strength=cfg.prior_strength)
    grpo_s = time.perf_counter() - started
    val_sft, val_grpo = _val_utility(sft_dir / MODEL, data_dir, cfg), _val_utility(grpo_dir / MODEL, data_dir, cfg)
    kept = "grpo" if (val_grpo >= val_sft or not cfg.keep_best_on_val) else "sft"
    model_dir = (grpo_dir if kept == "grpo" else sft_dir) / MODEL
    log.info("verifier: SFT %d steps in %.0f s, GRPO %d steps in %.0f s; val utility SFT %.4f, GRPO %.4f: kept %s",
             sft["global_step"], sft_s, grpo["global_step"], grpo_s, val_sft, val_grpo, kept)
    return {"model_dir": str(model_dir), "kept": kept,
            "n_train_queries": stats["n_train_queries"], "n_val_rows": stats["n_val_rows"],
            "label_counts": {lam: v["label_counts"] for lam, v in stats["by_lambda"].items()},
            "sft": {"steps": int(sft["global_step"]), "seconds": sft_s, "train_loss": sft.get("train_loss"),
                    "trunk_features_s": sft.get("trunk_features_s"), "epochs": cfg.sft.epochs,
                    "router_layers": cfg.sft.router_layers},
            "grpo": {"steps": int(grpo["global_step"]), "seconds": grpo_s, "max_steps": cfg.grpo.max_steps,
                     "first_log": grpo.get("first_log"), "last_log": grpo.get("last_log")},
            "val_utility": {"sft": val_sft, "grpo": val_grpo}}


@dataclass
class VerifierScores:
    query_ids: list[str]
    margin: np.ndarray  # (Q,) (z_escalate − z_accept) / s: escalate when above the threshold
    energy_j: np.ndarray  # (Q,) the verifier's own joules per query
    energy_source: str
    seconds: float


def score(model_dir: Path, queries: pd.DataFrame, cfg: VerifierConfig, energy: EnergyConfig = EnergyConfig()
          ) -> VerifierScores:
    """The verifier's margin and own joules for every query of ``queries`` (query_id, task, question)."""
    router = LMRouter(model_dir, meter=make_meter(energy), cfg=RouterConfig(threads=cfg.router_threads))
    if router.candidates != [ACCEPT, ESCALATE]:
        raise ValueError(f"{model_dir}: the verifier's candidates are {router.candidates}, not {[ACCEPT, ESCALATE]}")
    started = time.perf_counter()
    s = router.score(queries)
    seconds = time.perf_counter() - started
    margin = (s.merit[:, 1] - s.merit[:, 0]) / s.scale
    return VerifierScores(list(s.query_ids), margin, np.asarray(s.overhead_energy_j, dtype=float),
                          s.overhead_energy_source, seconds)
