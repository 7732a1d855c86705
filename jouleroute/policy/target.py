"""The one target type: what a deployed policy must meet, stated in a user's terms and checked on selection data.

- ``energy_share: s``: at most ``s`` × the best single model's J/query; among those, the most accurate;
- ``accuracy_floor: a``: accuracy at least ``a``; among those, the cheapest;
- ``iso_accuracy: true`` (what ``router.target: null``, the default, means): the floor is the best single's
  selection accuracy minus ``evaluate.accuracy_tolerance``: the cheapest point that does as well as the best model;
- ``above_best: margin``: above the best single's accuracy *by a paired-bootstrap interval* clearing ``margin``
  (0: the interval excludes 0); among those, the cheapest. The interval, not the point estimate: among many
  operating points the cheapest one merely above on selection is above by luck as often as not.

The best single is ``singles.best_single`` on the same queries. ``meet.meet_target`` applies a target to any set
of operating points (a router's λ grid, a cascade's chains, the contenders' deployed points).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from jouleroute.strict import StrictModel

TargetKind = Literal["energy_share", "accuracy_floor", "iso_accuracy", "above_best"]


class Target(StrictModel):
    """Exactly one of ``energy_share``, ``accuracy_floor``, ``iso_accuracy`` and ``above_best`` (module doc)."""

    energy_share: float | None = Field(default=None, gt=0.0)
    accuracy_floor: float | None = Field(default=None, ge=0.0, le=1.0)
    iso_accuracy: Literal[True] | None = None
    above_best: float | None = Field(default=None, ge=0.0)  # the margin the interval must clear

    @model_validator(mode="after")
    def _exactly_one(self) -> "Target":
        given = (self.energy_share, self.accuracy_floor, self.iso_accuracy, self.above_best)
        if sum(v is not None for v in given) != 1:
            raise ValueError("a target takes exactly one of energy_share (e.g. 0.5: half the best single model's "
                             "energy), accuracy_floor (e.g. 0.8), iso_accuracy: true (the best single's accuracy "
                             "minus evaluate.accuracy_tolerance) and above_best (e.g. 0.0: above the best single's "
                             "accuracy by a bootstrap interval clearing this margin)")
        return self

    @classmethod
    def of(cls, kind: str, value: float | None = None) -> "Target":
        """The target of ``kind`` with ``value`` (ignored for iso_accuracy)."""
        return cls(**({"iso_accuracy": True} if kind == "iso_accuracy" else {kind: value}))

    @property
    def kind(self) -> TargetKind:
        if self.iso_accuracy:
            return "iso_accuracy"
        if self.energy_share is not None:
            return "energy_share"
        return "accuracy_floor" if self.accuracy_floor is not None else "above_best"

    @property
    def value(self) -> float:
        """The share, the floor or the margin (iso_accuracy: 0, the floor is the caller's best − tolerance)."""
        for v in (self.energy_share, self.accuracy_floor, self.above_best):
            if v is not None:
                return float(v)
        return 0.0

    def describe(self) -> str:
        """One phrase for report tables: ``≤ 90% of the best's energy``, ``accuracy ≥ 0.8``, ..."""
        return {"iso_accuracy": "the best single's accuracy − tolerance",
                "energy_share": f"≤ {self.value:.0%} of the best single's energy",
                "accuracy_floor": f"accuracy ≥ {self.value:g}",
                "above_best": f"above the best single by a paired CI clearing {self.value:g}"}[self.kind]


DEFAULT_TARGET = Target(iso_accuracy=True)  # router.target: null (the default) means this


def effective_target(target: Target | None) -> Target:
    return DEFAULT_TARGET if target is None else target


class TargetNotMet(ValueError):
    """No operating point meets the target."""
