"""run.json's idle_power_w says what the profile holds: one value, or each candidate's when its meters differ.

Profiles shaped as the tournament writes them (sorted by candidate_id, query_id; idle_power_w on every row).
"""

from __future__ import annotations

import pandas as pd

from jouleroute.stages.tournament import recorded_idle_power_w


def _profile(rows: list[tuple[str, float, str]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["candidate_id", "idle_power_w", "energy_source"])
    frame["query_id"] = [f"q{i % 2}" for i in range(len(frame))]
    return frame.sort_values(["candidate_id", "query_id"]).reset_index(drop=True)


def test_one_meter_keeps_the_single_value():
    # the committed pipelines: one CPU estimate meter, or modelled energy (0 W by convention)
    estimate = _profile([(c, 0.00024, "estimated") for c in ("gemma3-loglik", "smollm2-loglik") for _ in range(2)])
    assert recorded_idle_power_w(estimate) == 0.00024
    modelled = _profile([(c, 0.0, "modelled") for c in ("a", "b") for _ in range(2)])
    assert recorded_idle_power_w(modelled) == 0.0
    assert recorded_idle_power_w(modelled.iloc[:0]) is None


def test_several_meters_are_recorded_per_candidate_not_as_the_first_rows():
    served = _profile([("a-modelled", 0.0, "modelled")] * 2 + [("b-measured", 61.3, "measured-nvml")] * 2)
    assert recorded_idle_power_w(served) == {"a-modelled": [0.0], "b-measured": [61.3]}
    # two Dask workers metered one candidate, each idle power on its own GPU
    workers = _profile([("a", 58.0, "measured-nvml"), ("a", 61.5, "measured-nvml"), ("b", 61.5, "measured-nvml")])
    assert recorded_idle_power_w(workers) == {"a": [58.0, 61.5], "b": [61.5]}
