"""Typed config of the labels package: how a user's prompts become queries, and how answers become labels."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

# How a prompts file is read is declared beside prepare's config (``prepare.prompts``), which holds it.
from jouleroute.benchmarks.config import PromptsConfig
from jouleroute.strict import StrictModel

__all__ = ["LabelsConfig", "PromptsConfig"]


class LabelsConfig(StrictModel):
    """Params ``labels``: how a candidate's answer is marked correct (``policies.apply_labels``).

    ``source: gold`` keeps the grader's labels; ``reference`` marks an answer correct iff it agrees with the
    ``reference`` candidate's (which is then correct by definition); ``vote`` iff it agrees with the pool's
    plurality answer (a tie labels nothing). ``feedback``, a table of user scores per (query_id, candidate_id),
    overrides any of them; a profile whose rows then carry two sources needs ``allow_mixed``.
    """

    source: Literal["gold", "reference", "vote"] = "gold"
    reference: str | None = None  # the reference candidate's id, with source: reference
    feedback: str | None = None  # a parquet, CSV or JSONL table: query_id, candidate_id, score in [0, 1]
    allow_mixed: bool = False  # validation accepts a profile whose rows carry more than one label_source
    # validation refuses labels that mark fewer of the profiled queries: a router trained on the few queries whose
    # answers could be compared learns a biased picture of the traffic (the left-out ones are counted by reason)
    min_coverage: float = Field(default=0.5, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _reference_named_iff_used(self) -> "LabelsConfig":
        if self.source == "reference" and not self.reference:
            raise ValueError("labels.reference: name the reference candidate (source: reference)")
        if self.source != "reference" and self.reference:
            raise ValueError(f"labels.reference is set ({self.reference!r}) but labels.source is {self.source!r}: "
                             "set source: reference or drop the reference")
        return self
