"""params.yaml section `validate`."""

from __future__ import annotations

from pydantic import Field

from jouleroute.strict import StrictModel


class ValidateConfig(StrictModel):
    """params.yaml section `validate`."""

    # whether a profile may mix energy_source labels is energy_policy.allow_mixed_sources (one rule for all stages)
    example_rows: int = Field(default=5, ge=1, le=100)  # offending rows shown per failed expectation
    raise_on_failure: bool = True  # False: return the failed result instead of raising (exploration only)
    data_docs: bool = True  # also build GE data docs (~1 s); report.json and report.html are always written
