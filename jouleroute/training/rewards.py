"""GRPO rewards: plain functions with TRL's signature, looked up by name.

Each reward is ``fn(completions, **dataset_columns) -> list[float | None]``. The columns
come from the GRPO dataset row of each completion:

* ``correct_by_candidate``: {name: 0|1} (dict or JSON string; the router keys it by label token)
* ``energy_by_candidate``:  {name: joules} (dict or JSON string)
* ``lam``:                  the row's energy weight λ

Let c be the candidate the completion names (``parse_choice``), or "invalid":

* ``correctness``    = correct(c);                 invalid -> 0
* ``energy_penalty`` = −λ · norm_energy(c);         invalid -> −λ (as costly as the priciest)
* ``format``         = 0 when c is valid;          invalid -> −1

With weights (1, 1, w) the sum of the first two is the utility that defines the SFT
labels (``routing.utility``), so GRPO keeps optimizing what SFT imitated.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

from jouleroute.routing.scores import energy_penalty as penalty_term
from jouleroute.routing.scores import normalize_energy_map

RewardFn = Callable[..., list[float | None]]

_STRIP = " \t\r\n\"'`.*"


def completion_text(completion: Any) -> str:
    """Text of a completion given as a string or as TRL's list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return ""


def parse_choice(completion: Any, names: list[str] | set[str]) -> str | None:
    """The name a completion states exactly (after trimming whitespace and quotes), or ``None``."""
    text = completion_text(completion).strip(_STRIP)
    return text if text in names else None


def _as_mapping(value: Any, column: str) -> Mapping[str, Any]:
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, Mapping):
        raise TypeError(f"GRPO column '{column}' must be a dict or a JSON object string, got {type(value).__name__}")
    return value


def _choices(completions: Sequence[Any], by_candidate: Sequence[Any], column: str) -> list[tuple[str | None, Mapping]]:
    if len(by_candidate) != len(completions):
        raise ValueError(f"'{column}' has {len(by_candidate)} rows for {len(completions)} completions")
    out = []
    for completion, raw in zip(completions, by_candidate):
        table = _as_mapping(raw, column)
        out.append((parse_choice(completion, set(table)), table))
    return out


def correctness(completions: Sequence[Any], correct_by_candidate: Sequence[Any], **_: Any) -> list[float | None]:
    """1.0 when the named candidate answered this query correctly, else 0.0 (invalid: 0.0)."""
    return [float(table[c]) if c is not None else 0.0 for c, table in _choices(completions, correct_by_candidate, "correct_by_candidate")]


def expected_correctness(completions: Sequence[Any], expected_correct_by_candidate: Sequence[Any],
                         **_: Any) -> list[float | None]:
    """The named candidate's posterior-mean correctness on this query (invalid: 0.0).

    ``(correct + k·prior) / (1 + k)``: the one observed outcome shrunk toward the candidate's TRAIN
    accuracy on the task (router_data's ``prior_strength``), the quantity the SFT labels maximize.
    """
    return [float(table[c]) if c is not None else 0.0
            for c, table in _choices(completions, expected_correct_by_candidate, "expected_correct_by_candidate")]


def energy_penalty(
    completions: Sequence[Any],
    energy_by_candidate: Sequence[Any],
    lam: Sequence[float],
    energy_norm: str = "max",
    **_: Any,
) -> list[float | None]:
    """−λ x the named candidate's energy, normalized over this query's candidates."""
    if len(lam) != len(completions):
        raise ValueError(f"'lam' has {len(lam)} rows for {len(completions)} completions")
    rewards: list[float | None] = []
    for (choice, table), weight in zip(_choices(completions, energy_by_candidate, "energy_by_candidate"), lam):
        normed = normalize_energy_map({c: float(e) for c, e in table.items()}, energy_norm)
        rewards.append(-penalty_term(normed[choice] if choice is not None else 1.0, float(weight)))
    return rewards


def format_reward(completions: Sequence[Any], correct_by_candidate: Sequence[Any], **_: Any) -> list[float | None]:
    """0.0 when the completion is exactly one valid candidate id, −1.0 otherwise."""
    return [0.0 if c is not None else -1.0 for c, _table in _choices(completions, correct_by_candidate, "correct_by_candidate")]


REWARDS: dict[str, RewardFn] = {
    "correctness": correctness,
    "expected_correctness": expected_correctness,
    "energy_penalty": energy_penalty,
    "format": format_reward,
}


def get_reward(name: str) -> RewardFn:
    """The reward registered as ``name``; an unknown name lists the valid ones."""
    try:
        return REWARDS[name]
    except KeyError:
        raise ValueError(f"unknown reward '{name}'; valid rewards: {', '.join(sorted(REWARDS))}") from None


def build_rewards(weights: Mapping[str, float], energy_norm: str = "max") -> tuple[list[RewardFn], list[float]]:
    """Reward functions and weights, in config order, ready for GRPOTrainer.

    Each function is wrapped so TRL logs it as ``rewards/<registry name>/mean`` and so
    ``energy_penalty`` gets the configured normalization.
    """
    funcs, values = [], []
    for name, weight in weights.items():
        base = get_reward(name)

        def named(completions, _base=base, **columns):
            return _base(completions, energy_norm=energy_norm, **columns)

        named.__name__ = name
        funcs.append(named)
        values.append(float(weight))
    return funcs, values
