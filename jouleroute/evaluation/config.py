"""Typed config of stage `evaluate` (params.yaml section `evaluate`)."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from jouleroute.policy.cascade_config import CascadeConfig
from jouleroute.strict import StrictModel

# inside the router's default trained grid (router_data.lambdas: 0..2); params validation checks it
DEFAULT_LAMBDAS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


class DecisionGrid(StrictModel):
    """λ = 0 and ``points - 1`` log-spaced values from ``low`` to ``high``: where a deployed λ may sit."""

    low: float = Field(default=0.001, gt=0.0)
    high: float = Field(default=2.0, gt=0.0)  # the default trained range's top (router_data.lambdas): servable
    points: int = Field(default=40, ge=3, le=1000)

    @model_validator(mode="after")
    def _ordered(self) -> "DecisionGrid":
        if self.high <= self.low:
            raise ValueError(f"evaluate.decision_grid: high ({self.high}) must exceed low ({self.low})")
        return self

    @property
    def lambdas(self) -> list[float]:
        return [0.0] + [float(x) for x in np.geomspace(self.low, self.high, self.points - 1)]


class EvaluateConfig(StrictModel):
    """How routers are scored. Every metric is defined in docs/metrics.md."""

    split: Literal["train", "val", "test"] = "test"  # routers are scored on this split only
    # Energy-penalty weights each lambda-family router is run at (the lead's routers
    # read them from here); the phase-transition detector needs a log-spaced sweep.
    lambdas: tuple[float, ...] = DEFAULT_LAMBDAS
    # "above_median": candidates whose mean J/query exceeds the pool median;
    # "top": only the candidate with the highest mean J/query.
    expensive_rule: Literal["above_median", "top"] = "above_median"
    # A router "keeps accuracy" when within this many accuracy points (fraction) of the best single candidate.
    accuracy_tolerance: float = Field(default=0.01, ge=0.0, le=1.0)
    # how the champion (the router `serve` deploys) is chosen on val (evaluation/val_contest.py): "utility", the
    # higher mean val utility over the trained λ grid; "iso_accuracy", among the contenders tied with that best
    # (paired CI holds 0), the one that spends least at the best single model's val accuracy (accuracy_tolerance)
    champion_by: Literal["iso_accuracy", "utility"] = "iso_accuracy"
    include_overhead: bool = True  # headline energy/latency include the router's own measured overhead
    # cascades that read the answers (evaluation/cascades.py): searched on selection data and scored on
    # test beside the routers when the profile carries answers; the targets, the stage size and the out-of-fold
    # check: jouleroute/policy/cascade_config.py
    cascade: CascadeConfig = Field(default_factory=CascadeConfig)
    # which energy column, and whether figures of several energy_source labels may be compared: params
    # `energy_policy` (one for every stage), handed to run_evaluate
    # A lambda curve whose total change is below this is reported as having no transition.
    min_transition_change: float = Field(default=0.05, gt=0.0, le=1.0)
    bootstrap_samples: int = Field(default=1000, ge=0, le=100_000)  # 0 disables confidence intervals
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    seed: int = 0
    # route and score a seeded sample of at most this many split queries (null = every one)
    max_queries: int | None = Field(default=None, ge=1)
    plots: bool = True
    # kNN's neighbour evidence in the LM router: the blend weights tried on val (0 = the LM alone, always
    # tried; ties keep it). Empty, or only 0, turns it off. evaluation/knn_evidence.py, docs/router-training.md.
    knn_evidence_weights: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75)

    # The grid the deployed λ is chosen on (evaluation/deployed.py): deciding at another λ costs no inference,
    # so it is much finer than the trained grid (router_data.lambdas) or the reported sweep (lambdas): λ = 0 and
    # `points - 1` log-spaced values from `low` to `high`; only those inside the trained range are used (the
    # gateway serves no λ outside it).
    decision_grid: DecisionGrid = Field(default_factory=lambda: DecisionGrid())
    # The deployed point is non-inferior to the best single model when the lower end of the paired CI of its
    # test accuracy difference is above -noninferiority_margin (docs/metrics.md, "The deployed point", says why 0.03).
    noninferiority_margin: float = Field(default=0.03, ge=0.0, le=1.0)
    # Learned baseline families are cross-fitted over this many folds of train+val to choose the deployed λ on
    # every selection query, not on val alone (1: val alone). The LM router is chosen on val (its cost).
    selection_folds: int = Field(default=5, ge=1, le=20)
    # bootstrap resamples of the selection data that measure how stable each choice is (0: not measured)
    stability_samples: int = Field(default=200, ge=0, le=10_000)

    @field_validator("knn_evidence_weights")
    @classmethod
    def _weights_in_unit_interval(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0.0 <= v <= 1.0 for v in values):
            raise ValueError(f"evaluate.knn_evidence_weights must each be in [0, 1], got {list(values)}")
        return values

    @field_validator("lambdas")
    @classmethod
    def _log_spaced_sweep(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        if len(values) < 7:
            raise ValueError(f"evaluate.lambdas needs at least 7 values to locate a transition, got {len(values)}")
        if any(not math.isfinite(v) or v <= 0 for v in values):
            raise ValueError(f"evaluate.lambdas must all be finite and > 0, got {list(values)}")
        if any(b <= a for a, b in zip(values, values[1:])):
            raise ValueError(f"evaluate.lambdas must be strictly increasing, got {list(values)}")
        if values[-1] / values[0] < 10:
            raise ValueError(
                f"evaluate.lambdas must span at least one decade (log-spaced sweep), got {values[0]}..{values[-1]}"
            )
        return values
