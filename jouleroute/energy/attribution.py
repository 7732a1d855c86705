"""Split one batch window's energy over the requests that shared it.

Rule (also written into every profile row as ``energy_attribution``): each request gets
a share proportional to ``output_tokens + prefill_weight * input_tokens``. ML.ENERGY
divides steady-state energy by generated tokens; the small prefill term keeps a request
with a long prompt and a one-token answer from being charged nothing. Idle power is
charged the same way: ``energy_net_j = energy_j - idle_power_w * window_s * share``, so
the raw and net shares each sum to the window's raw and net energy.
"""

from __future__ import annotations

from jouleroute.energy.base import Measurement
from jouleroute.energy.config import DEFAULT_PREFILL_WEIGHT


def attribution_rule(prefill_weight: float = DEFAULT_PREFILL_WEIGHT) -> str:
    """The rule as a short string, stored in the profile column ``energy_attribution``."""
    return (
        f"token-share:w=output_tokens+{prefill_weight:g}*input_tokens;"
        "net=energy-idle_power_w*window_s*share"
    )


ATTRIBUTION_RULE = attribution_rule()


def token_shares(input_tokens: list[int], output_tokens: list[int], prefill_weight: float) -> list[float]:
    """Fraction of the window each request is charged; sums to 1 (equal split when no tokens)."""
    if len(input_tokens) != len(output_tokens):
        raise ValueError(f"input_tokens has {len(input_tokens)} entries, output_tokens {len(output_tokens)}")
    if not input_tokens:
        return []
    if any(t < 0 for t in input_tokens) or any(t < 0 for t in output_tokens):
        raise ValueError("token counts must be >= 0")
    weights = [out + prefill_weight * inp for inp, out in zip(input_tokens, output_tokens)]
    total = sum(weights)
    if total == 0:
        return [1.0 / len(weights)] * len(weights)
    return [w / total for w in weights]


def attribute_window(
    measurement: Measurement,
    input_tokens: list[int],
    output_tokens: list[int],
    idle_power_w: float,
    prefill_weight: float = DEFAULT_PREFILL_WEIGHT,
) -> list[tuple[float, float]]:
    """``[(energy_j, energy_net_j), ...]``, one pair per request, in request order.

    ``energy_net_j`` may be negative when the window drew less than the idle power (counter
    noise on a near-idle device); it is kept as is so that sums stay unbiased.
    """
    shares = token_shares(input_tokens, output_tokens, prefill_weight)
    idle_j = idle_power_w * measurement.time_s
    return [(measurement.energy_j * s, (measurement.energy_j - idle_j) * s) for s in shares]
