"""A target instead of a λ: the energy weight that meets a user's energy or accuracy goal, chosen on val.

A user rarely knows which λ they want; they know "half the energy of the best model" or "at least 80%
accuracy". ``router.target`` states one of the two, and the λ is read off the champion's val sweep (its
accuracy and models' J/query at each λ of ``evaluate.lambdas`` on the val queries):

- ``energy_share: s``: among the λ whose val J/query is at most ``s`` × the best single model's val J/query
  (best single: the most accurate candidate on val, ties to the cheaper), the most accurate one (ties: the
  cheaper, then the larger λ);
- ``accuracy_floor: a``: among the λ whose val accuracy is at least ``a``, the cheapest one (ties: the
  more accurate, then the smaller λ);
- ``iso_accuracy: true`` (what ``router.target: null``, the default, means): the accuracy floor is the best
  single model's selection accuracy minus ``evaluate.accuracy_tolerance``: the cheapest λ that does as well as
  the best model (evaluation/deployed.py chooses it on selection data, never on test).

A target that no λ of the grid meets on val is reported as such (``met_on_val: false``, ``lam: null``,
with the closest the grid gets); it is never clipped to the nearest λ. The evaluate stage writes the val
sweep and the choice into report.json (``target``), shows how test met it, and ``jouleroute serve
--target-energy-share`` / ``--target-accuracy`` resolves a target against the same sweep (``resolve_lambda``).
"""

from __future__ import annotations

from typing import Literal, Sequence

from pydantic import Field, model_validator

from jouleroute.strict import StrictModel

_EPS = 1e-12


class RouterTarget(StrictModel):
    """Exactly one of ``energy_share`` (a share of the best single model's energy), ``accuracy_floor`` and
    ``iso_accuracy`` (the best single model's accuracy minus the tolerance the caller gives)."""

    energy_share: float | None = Field(default=None, gt=0.0)
    accuracy_floor: float | None = Field(default=None, ge=0.0, le=1.0)
    iso_accuracy: Literal[True] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "RouterTarget":
        if sum(v is not None for v in (self.energy_share, self.accuracy_floor, self.iso_accuracy)) != 1:
            raise ValueError("router.target takes exactly one of energy_share (e.g. 0.5: half the best single "
                             "model's energy), accuracy_floor (e.g. 0.8) and iso_accuracy: true (the best single "
                             "model's accuracy minus evaluate.accuracy_tolerance)")
        return self

    @property
    def kind(self) -> str:
        if self.iso_accuracy:
            return "iso_accuracy"
        return "energy_share" if self.energy_share is not None else "accuracy_floor"

    @property
    def value(self) -> float:
        """The share, or the accuracy floor (iso_accuracy: 0, the floor is the caller's best − tolerance)."""
        return float(self.energy_share if self.energy_share is not None else self.accuracy_floor or 0.0)


DEFAULT_TARGET = RouterTarget(iso_accuracy=True)  # router.target: null (the default) means this


def effective_target(target: RouterTarget | None) -> RouterTarget:
    return DEFAULT_TARGET if target is None else target


class TargetNotMet(ValueError):
    """No λ of the grid meets the target on val."""


def choose_lambda(target: RouterTarget, lams: Sequence[float], accuracy: Sequence[float],
                  j_per_query: Sequence[float], best_accuracy: float, best_j_per_query: float,
                  tolerance: float = 0.0) -> dict:
    """The λ of the grid that meets ``target`` on val (module docstring), or why none does; ``tolerance``: an
    iso_accuracy target's, below the best single's accuracy."""
    if not (len(lams) == len(accuracy) == len(j_per_query)) or not lams:
        raise ValueError("choose_lambda needs one accuracy and one J/query per λ of a non-empty grid")
    if best_j_per_query <= 0:
        raise ValueError(f"the best single model's J/query must be > 0, got {best_j_per_query}")
    shares = [j / best_j_per_query for j in j_per_query]
    points = list(zip(lams, accuracy, shares))
    if target.kind == "energy_share":
        feasible = [p for p in points if p[2] <= target.value + _EPS]
        pick = max(feasible, key=lambda p: (p[1], -p[2], p[0])) if feasible else None
        closest = min(points, key=lambda p: (p[2], -p[1]))
    else:
        floor = best_accuracy - tolerance if target.kind == "iso_accuracy" else target.value
        feasible = [p for p in points if p[1] >= floor - _EPS]
        pick = min(feasible, key=lambda p: (p[2], -p[1], p[0])) if feasible else None
        closest = max(points, key=lambda p: (p[1], -p[2]))
    value = best_accuracy - tolerance if target.kind == "iso_accuracy" else target.value
    out = {"kind": target.kind, "value": float(value), "met_on_val": pick is not None,
           "best_single_val_accuracy": float(best_accuracy), "best_single_val_j_per_query": float(best_j_per_query)}
    if pick is None:
        what = (f"the cheapest λ ({closest[0]:g}) needs {closest[2]:.1%} of the best single model's energy on val"
                if target.kind == "energy_share" else
                f"the most accurate λ ({closest[0]:g}) reaches {closest[1]:.3f} on val")
        return out | {"lam": None, "val_accuracy": None, "val_energy_share": None,
                      "reason": f"no λ of the grid meets {target.kind} {value:g} on val: {what}",
                      "closest": {"lam": float(closest[0]), "val_accuracy": float(closest[1]),
                                  "val_energy_share": float(closest[2])}}
    return out | {"lam": float(pick[0]), "val_accuracy": float(pick[1]), "val_energy_share": float(pick[2])}


def resolve_lambda(target: RouterTarget, val_sweep: dict) -> float:
    """The λ that meets ``target`` on the champion's val sweep (report.json's ``target.val_sweep``);
    raises ``TargetNotMet`` with the closest the grid gets."""
    choice = choose_lambda(target, val_sweep["lam"], val_sweep["accuracy"], val_sweep["j_per_query"],
                           val_sweep["best_single_accuracy"], val_sweep["best_single_j_per_query"],
                           val_sweep.get("tolerance", 0.0))
    if not choice["met_on_val"]:
        raise TargetNotMet(choice["reason"])
    return choice["lam"]
