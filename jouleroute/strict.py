"""Base class for typed configuration: unknown keys and wrong types are errors."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo

# The validation context of a params file (config.load_params): strict types, as YAML wrote them. A quoted
# ``"7"`` is no int and ``"yes"`` no bool there; an int is still a float, a list still a tuple.
STRICT_CONTEXT = {"strict": True}


class StrictModel(BaseModel):
    """A pydantic model that rejects unknown keys and, read from a params file, never coerces.

    Every section of ``params.yaml`` is one of these, so a typo such as
    ``max_new_token`` fails loudly instead of being ignored, and ``seed: "7"`` is refused, not read as 7.
    The file is validated in pydantic's strict JSON mode (``config.load_params``); configs that code builds in
    Python (tests, ``model_copy``) keep pydantic's default conversions.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def validate_as_parent(model: type[BaseModel], data: Any, info: ValidationInfo) -> BaseModel:
    """``data`` validated by ``model`` the way its parent is being validated: strictly when the parent is read
    from a params file (a sub-section a validator dispatches by hand, e.g. ``baselines.knn``), else by default."""
    if (info.context or {}).get("strict"):
        return model.model_validate_json(json.dumps(data), strict=True, context=info.context)
    return model.model_validate(data)
