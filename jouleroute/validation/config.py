"""params.yaml section `validate`."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from jouleroute.strict import StrictModel


class ValidateConfig(StrictModel):
    """params.yaml section `validate`."""

    # whether a profile may mix energy_source labels is energy_policy.allow_mixed_sources (one rule for all stages)
    example_rows: int = Field(default=5, ge=1, le=100)  # offending rows shown per failed expectation
    raise_on_failure: bool = True  # False: return the failed result instead of raising (exploration only)
    data_docs: bool = True  # also build GE data docs (~1 s); report.json and report.html are always written
    # Plausibility: a generated answer's joules per output token is at least this. 0.001 J = 1% of the smallest
    # ML.ENERGY reference (Mistral-7B on an H100 at batch 1280: 0.102 J/token); the client's own CPU time for
    # an HTTP call to a served model (0.008 J per answer) falls far below. 0 turns the check off.
    min_j_per_output_token: float = Field(default=0.001, ge=0)


@dataclass(frozen=True)
class LabelCheck:
    """What validate checks of a labelled profile (params ``labels``; the coverage from the labels stage)."""

    allow_mixed: bool  # labels.allow_mixed: rows may carry several label_source values
    coverage: float  # labelled queries / profiled queries (stage labels' summary.json)
    min_coverage: float  # labels.min_coverage
