"""Base class for typed configuration: unknown keys and wrong types are errors."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model that rejects unknown keys and never coerces silently.

    Every section of ``params.yaml`` is one of these, so a typo such as
    ``max_new_token`` fails loudly instead of being ignored.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
