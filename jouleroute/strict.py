"""Base class for typed configuration: unknown keys and wrong types are errors; and the YAML reading every
config file shares: a key given twice, or a value YAML types beyond JSON (an unquoted date), is refused."""

from __future__ import annotations

import json
from typing import Any

import yaml
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


class UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice in one mapping: PyYAML would keep the last one silently, so a
    second ``router:`` section would drop the first's keys without a word."""


def _unique_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    first: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: merged by construct_mapping below
            continue
        key = loader.construct_object(key_node, deep=True)
        if key in first:
            raise yaml.constructor.ConstructorError(None, None, f"{key!r} is given twice in one mapping (first at "
                                                    f"line {first[key]}); keep one", key_node.start_mark)
        first.setdefault(key, key_node.start_mark.line + 1)
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


JSON_SCALARS = (str, int, float, bool, type(None))
YAML_KINDS = {"date": "a date", "datetime": "a date and time", "bytes": "binary data", "set": "a set"}


def yaml_only_value(node: object, where: tuple = ()) -> str | None:
    """'key: what YAML read, and how to write it' for the first value (or key) that YAML types beyond JSON, else None.
    An unquoted ``2024-01-01`` is a date to YAML: turned into text behind the user's back, it passed any text field."""
    if isinstance(node, JSON_SCALARS):
        return None
    if not isinstance(node, (dict, list)):
        return _unquoted(where, node)
    for key, value in node.items() if isinstance(node, dict) else enumerate(node):
        if not isinstance(key, JSON_SCALARS):  # a key written `2024-01-01:`
            return _unquoted(where, key, as_key=True)
        found = yaml_only_value(value, (*where, key))
        if found:
            return found
    return None


def _unquoted(where: tuple, value: object, as_key: bool = False) -> str:
    kind = YAML_KINDS.get(type(value).__name__, f"a {type(value).__name__}")
    key = ".".join(map(str, where)) or "<top>"
    if as_key:
        return f'{key}: YAML reads the key {value} as {kind}, not text: quote it ("{value}": ...)'
    written = f"{where[-1]}: " if where and isinstance(where[-1], str) else "- " if where else ""
    return f'{key}: YAML reads {value} as {kind}, not text: quote it where text is meant ({written}"{value}")'
