"""``evaluate.cascade``: whether the evaluate stage searches cascades, for which targets, and how it checks them.

- ``enabled``: search and report cascades when the profile carries answers (a pool without says so in one line);
- ``targets``: the chains chosen, by the name the report, metrics.json and the chain file (``cascade/<name>.json``)
  carry, each a ``policy.target.Target``. The defaults: ``iso_accuracy`` (the router's default target) and
  ``above_best`` (above the best single's accuracy by a paired interval). The deployed router's own target
  (``router.target``) is added as ``router_target`` when it is none of these, so the cascade is always chosen for
  what the router was; the decision figure (``energy_share: 1.0``) is always reported;
- ``max_stage_size``: the largest non-final stage (2: pairs; 3 adds triples, O(K⁶) chains; search.py);
- ``cross_fit_folds``: each target's *rule* is also scored out of fold on the selection data (choose on k−1
  folds, score on the held-out one; policy/cascade_choice.py): how much of a chain's selection lead survives the choice among
  thousands. 0 or 1 turns that check off (not the calibration below, which cross-fits over
  ``evaluate.selection_folds``, as the deployment);
- ``calibration_slacks``: accuracy points above a floor target's floor (``iso_accuracy``, ``accuracy_floor``) that
  a chain may be chosen at: the smallest whose rule still meets the target out of fold on the data the choice is
  made on (policy/cascade_choice.py, ``calibrate_slack``), so the cheapest chain that clears the floor by luck
  among thousands is not the one deployed. ``[0]`` turns it off.

It lives in the policy layer because its targets are the policy's one ``Target``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from jouleroute.policy.target import Target
from jouleroute.strict import StrictModel

DEFAULT_TARGETS = {"iso_accuracy": Target(iso_accuracy=True), "above_best": Target(above_best=0.0)}
ROUTER_TARGET = "router_target"


class CascadeConfig(StrictModel):
    """The evaluate stage's cascade search (module doc)."""

    enabled: bool = True
    targets: dict[str, Target] = Field(default_factory=lambda: dict(DEFAULT_TARGETS))
    max_stage_size: int = Field(default=2, ge=2, le=3)
    cross_fit_folds: int = Field(default=5, ge=0, le=20)
    calibration_slacks: list[Annotated[float, Field(ge=0.0, le=1.0)]] = Field(
        default_factory=lambda: [0.0, 0.005, 0.01, 0.015, 0.02], min_length=1)

    @field_validator("targets")
    @classmethod
    def _names_are_file_names(cls, targets: dict[str, Target]) -> dict[str, Target]:
        odd = [n for n in targets if not n.replace("_", "").replace("-", "").isalnum()]
        if odd:
            raise ValueError(f"evaluate.cascade.targets: names become chain files (cascade/<name>.json); use "
                             f"letters, digits, '_' and '-', got {odd}")
        if ROUTER_TARGET in targets:
            raise ValueError(f"evaluate.cascade.targets: {ROUTER_TARGET!r} is the router's own target, added by "
                             "the evaluate stage; name yours otherwise")
        return targets

    def with_router_target(self, kind: str | None, value: float | None) -> dict[str, Target]:
        """``targets`` plus the deployed router's (``kind``: iso_accuracy, energy_share or accuracy_floor) when
        it is none of them."""
        targets = dict(self.targets)
        if kind is None:
            return targets
        mine = Target.of(kind, value)
        if mine not in targets.values():
            targets[ROUTER_TARGET] = mine
        return targets
