"""Typed settings of the verifier study; an unknown key is an error (``StrictModel``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from jouleroute.strict import StrictModel
from jouleroute.training.config import GrpoConfig, SftConfig

ACCEPT, ESCALATE = "accept", "escalate"  # the verifier's two choices (router candidates)


class VerifierConfig(StrictModel):
    """How stages are chosen, what the verifier reads, how it is trained and how it is compared."""

    first: str | None = None  # null: the most accurate cheap candidate on selection (stages.choose_stages)
    final: str | None = None  # null: the best single on selection
    cheap_share: float = Field(default=0.05, gt=0, le=1)  # cheap: selection J/query <= this x the final's
    max_query_tokens: int = Field(default=192, ge=16)  # the verifier's token budget (head and tail kept)
    work_chars: int = Field(default=300, ge=0)  # the tail of the first model's output text it reads
    lambdas: tuple[float, ...] = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)  # the trained λ grid
    # router_data's label policy: the study's recipe (expected_utility, the outcome shrunk toward the task prior), or
    # utility (the realized outcome: escalate exactly where the first is wrong and the final right, below λ ~ 1)
    label_policy: Literal["utility", "expected_utility", "cheapest_correct"] = "expected_utility"
    prior_strength: float = Field(default=4.0, ge=0)  # expected_utility's pseudo-counts
    sft: SftConfig = SftConfig(epochs=2, router_layers=6, threads=2)
    grpo: GrpoConfig = GrpoConfig(max_steps=200, threads=2)
    keep_best_on_val: bool = True  # GRPO's weights only when they do not lower the mean val utility
    router_threads: int = Field(default=2, ge=1)
    samples: int = Field(default=1000, ge=0)  # paired bootstrap resamples
    confidence: float = Field(default=0.95, gt=0, lt=1)
    seed: int = 0
