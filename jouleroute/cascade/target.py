"""What a cascade is chosen for: the router's targets (routing.target) plus "above the best single's accuracy".

- ``energy_share: s``: the most accurate chain whose selection J/query is at most ``s`` × the best single's
  (ties: the cheaper); ``energy_share: 1.0`` is the decision figure "the most accurate point at or below the
  best single's energy";
- ``accuracy_floor: a``: the cheapest chain with selection accuracy at least ``a`` (ties: the more accurate);
- ``iso_accuracy: true``: the floor is the best single's selection accuracy minus the caller's tolerance (the
  router's default target);
- ``above_best: margin``: a chain that beats the best single's accuracy *by a paired-bootstrap interval*: walking
  the selection Pareto frontier from cheap to dear, the first chain whose interval of the accuracy difference over
  the best single (on the selection queries) lies above ``margin`` (0: excludes 0). The interval, not the point
  estimate, because among thousands of chains the cheapest one that is merely above on selection is above by
  luck as often as not; stats.py's rule, "a win only when the interval excludes 0".

Every choice reads selection data only (train and val); when no chain meets the target, the closest one is
returned with ``met_on_selection: false`` and a reason, as the deployed λ does.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from jouleroute.strict import StrictModel

TargetKind = Literal["energy_share", "accuracy_floor", "iso_accuracy", "above_best"]


class CascadeTarget(StrictModel):
    """Exactly one of ``energy_share``, ``accuracy_floor``, ``iso_accuracy`` and ``above_best`` (module doc)."""

    energy_share: float | None = Field(default=None, gt=0.0)
    accuracy_floor: float | None = Field(default=None, ge=0.0, le=1.0)
    iso_accuracy: Literal[True] | None = None
    above_best: float | None = Field(default=None, ge=0.0)  # the margin the interval must clear

    @model_validator(mode="after")
    def _exactly_one(self) -> "CascadeTarget":
        given = (self.energy_share, self.accuracy_floor, self.iso_accuracy, self.above_best)
        if sum(v is not None for v in given) != 1:
            raise ValueError("a cascade target takes exactly one of energy_share (e.g. 0.9: at most 90% of the best "
                             "single's energy), accuracy_floor (e.g. 0.8), iso_accuracy: true (the best single's "
                             "accuracy minus the tolerance) and above_best (e.g. 0.0: above the best single's "
                             "accuracy by a bootstrap interval clearing this margin)")
        return self

    @property
    def kind(self) -> TargetKind:
        if self.iso_accuracy:
            return "iso_accuracy"
        if self.energy_share is not None:
            return "energy_share"
        return "accuracy_floor" if self.accuracy_floor is not None else "above_best"

    def describe(self) -> str:
        """One phrase for report tables: ``≤ 90% of the best's energy``, ``accuracy ≥ 0.8``, ..."""
        return {"iso_accuracy": "the best single's accuracy − tolerance",
                "energy_share": f"≤ {self.value:.0%} of the best single's energy",
                "accuracy_floor": f"accuracy ≥ {self.value:g}",
                "above_best": f"above the best single by a paired CI clearing {self.value:g}"}[self.kind]

    @property
    def value(self) -> float:
        """The share, the floor or the margin (iso_accuracy: 0, the floor is the caller's best − tolerance)."""
        for v in (self.energy_share, self.accuracy_floor, self.above_best):
            if v is not None:
                return float(v)
        return 0.0
