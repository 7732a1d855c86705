"""What an answer cost when the gateway cannot meter it: the profile's expectation, labelled so.

An upstream server (vLLM on another machine) draws power the gateway cannot read. For those
answers the gateway reports the tournament profile's energy *per weighted token* of that
candidate, times the answer's own token counts, with the tournament's attribution weights
(one generated token = 1, one prompt token = ``prefill_weight``). The label is
``expected:<the profile's energy_source>``: an expectation, never a measurement.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

logger = logging.getLogger(__name__)

UNAVAILABLE = "unavailable"  # no meter and no profile row for this candidate


@dataclass(frozen=True)
class Expected:
    j_per_token: float  # joules per weighted token
    source: str  # the profile's energy_source label(s)


class ExpectedEnergy:
    def __init__(self, rates: dict[str, Expected], prefill_weight: float) -> None:
        self.rates = rates
        self.prefill_weight = prefill_weight

    @classmethod
    def from_profile(cls, profile: pd.DataFrame | Path | None, prefill_weight: float) -> "ExpectedEnergy":
        if profile is None:
            return cls({}, prefill_weight)
        if not isinstance(profile, pd.DataFrame):
            if not Path(profile).is_file():
                logger.warning("no profile at %s: answers from upstream servers carry no energy figure", profile)
                return cls({}, prefill_weight)
            profile = pd.read_parquet(profile, columns=["candidate_id", "energy_j", "energy_source",
                                                         "input_tokens", "output_tokens"])
        rates = {}
        for candidate, rows in profile.groupby("candidate_id"):
            tokens = (rows["output_tokens"] + prefill_weight * rows["input_tokens"]).sum()
            if tokens > 0:
                source = "+".join(sorted(rows["energy_source"].astype(str).unique()))
                rates[str(candidate)] = Expected(float(rows["energy_j"].sum() / tokens), source)
        return cls(rates, prefill_weight)

    def estimate(self, candidate: str, input_tokens: int, output_tokens: int) -> tuple[float | None, str]:
        rate = self.rates.get(candidate)
        if rate is None:
            return None, UNAVAILABLE
        return rate.j_per_token * (output_tokens + self.prefill_weight * input_tokens), f"expected:{rate.source}"
