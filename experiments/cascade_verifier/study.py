"""The whole study on one finished study's artifacts: choose on selection, train, set on val, score on test.

``run_study`` reads ``<study>/artifacts/profile.parquet`` and ``queries.parquet`` (never written, never copied
into the repository: query text stays in ``work_dir``), and returns the figures' JSON: no query text, only
names, counts and numbers. ``study_config`` takes SFT's and GRPO's settings from the study's own params.yaml.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from jouleroute.cascade.chain import simulate
from jouleroute.cascade.matrix import cascade_matrix
from jouleroute.evaluation.deployed import selection_matrix
from jouleroute.evaluation.outcomes import build_matrix
from jouleroute.provenance import git_sha, hardware, stable_hash
from jouleroute.training.config import GrpoConfig, SftConfig

from experiments.cascade_verifier.compare import auc, choose_threshold, compare_on_test
from experiments.cascade_verifier.config import VerifierConfig
from experiments.cascade_verifier.derived import derived_tables
from experiments.cascade_verifier.stages import choose_stages
from experiments.cascade_verifier.train import score, train_verifier

log = logging.getLogger(__name__)
ENERGY_COLUMN = "energy_j"


def study_config(study_dir: Path, grpo_steps: int | None = None, **overrides) -> VerifierConfig:
    """The verifier's settings with the study's ``sft`` and ``grpo`` sections and its router_data labels (policy,
    prior strength, λ grid); ``grpo_steps`` cuts GRPO, ``overrides`` replace any field."""
    params = yaml.safe_load((Path(study_dir) / "params.yaml").read_text())
    grpo = dict(params.get("grpo") or {}, **({"max_steps": grpo_steps} if grpo_steps else {}))
    labels = {k: v for k, v in (params.get("router_data") or {}).items()
              if k in ("label_policy", "prior_strength", "lambdas")}
    return VerifierConfig(**{"sft": SftConfig(**(params.get("sft") or {})), "grpo": GrpoConfig(**grpo), **labels,
                             **overrides})


def _aligned(scores, query_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    where = {q: i for i, q in enumerate(scores.query_ids)}
    rows = [where[q] for q in query_ids]
    return scores.margin[rows], scores.energy_j[rows]


def run_study(study_dir: Path, models_dir: Path, work_dir: Path, cfg: VerifierConfig) -> dict:
    """Every figure of docs/cascade-verifier.md (module doc)."""
    started = time.perf_counter()
    artifacts = Path(study_dir) / "artifacts"
    profile = pd.read_parquet(artifacts / "profile.parquet")
    queries = pd.read_parquet(artifacts / "queries.parquet")
    selection = cascade_matrix(profile, selection_matrix(profile, queries, ENERGY_COLUMN))
    stages = choose_stages(selection, cfg)
    val = cascade_matrix(profile, build_matrix(profile, queries, "val", ENERGY_COLUMN))
    test = cascade_matrix(profile, build_matrix(profile, queries, "test", ENERGY_COLUMN))
    d_profile, d_queries = derived_tables(profile, queries, stages.first, stages.final, cfg.work_chars, ENERGY_COLUMN)
    training = train_verifier(d_profile, d_queries, cfg, Path(models_dir) / cfg.sft.base_model, Path(work_dir))
    by_id = d_queries.set_index("query_id")
    scored = {}
    for name, m in (("val", val), ("test", test)):
        frame = by_id.loc[m.query_ids].reset_index()
        s = score(Path(training["model_dir"]), frame, cfg)
        scored[name] = (s, *_aligned(s, m.query_ids))
    (val_s, val_margin, val_own), (test_s, test_margin, test_own) = scored["val"], scored["test"]
    share = stages.selection["agreement"]["energy_share_of_final"]
    point = choose_threshold(val, stages.first, stages.final, val_margin, val_own, share)
    c1, c2 = (val.correct[:, val.column(c)] for c in (stages.first, stages.final))
    point["auc_first_wrong_final_right"] = auc(val_margin, c1 < c2)
    a_val = simulate(stages.agreement, val)
    val_final_j = float(val.energy_j[:, val.column(stages.final)].mean())
    figures = compare_on_test(test, stages.agreement, stages.first, stages.final, test_margin, test_own,
                              point["threshold"], cfg.samples, cfg.confidence, cfg.seed)
    return {
        "study": Path(study_dir).name, "energy_column": ENERGY_COLUMN,
        "pool_energy_source": sorted(profile["energy_source"].unique()),
        "verifier_energy_source": test_s.energy_source,
        "stages": {"first": stages.first, "final": stages.final, "cheap": list(stages.cheap),
                   "agreement_chain": stages.agreement.name},
        "selection": stages.selection,
        "training": training | {"model_dir": None},
        "val": {"verifier": point, "agreement": {"accuracy": a_val.accuracy, "j_per_query": a_val.j_per_query,
                                                 "energy_share_of_final": a_val.j_per_query / val_final_j}},
        "scoring_seconds": {"val": val_s.seconds, "test": test_s.seconds},
        "test": figures,
        "config": cfg.model_dump(mode="json"),
        "provenance": {"git_sha": git_sha(), "config_hash": stable_hash(cfg.model_dump(mode="json")),
                       "hardware": hardware(), "seconds": time.perf_counter() - started},
    }
