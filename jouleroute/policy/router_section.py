"""The ``router`` section of params.yaml: LM-router inference (routing/lm/config.py) plus the target the deployed
policy must meet, whatever its kind (a policy concern, so it is added here, above routing)."""

from __future__ import annotations

from jouleroute.policy.target import Target
from jouleroute.routing.lm.config import RouterConfig


class RouterSection(RouterConfig):
    """``router``: inference settings, and ``target``: a target instead of a λ, e.g. {energy_share: 0.5} (of the
    best single model's energy), {accuracy_floor: 0.8}, {above_best: 0.0}; null means iso_accuracy. The evaluate
    stage deploys the policy that meets it on selection data (policy/target.py)."""

    target: Target | None = None
