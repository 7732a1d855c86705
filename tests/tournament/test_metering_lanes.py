"""Served candidates on one exporter GPU never have windows open at once (jouleroute/tournament/lanes.py).

Two vLLM-style servers on one node, metered by the node's one exporter: real HTTP servers and a
DCGM-format exporter on loopback (loopback_node.py; the GPUs are simulated counters, there is no GPU here),
the real OpenAI client, exporter meter and ``run_tournament``. A window books its GPUs' whole counter, so
if two candidates' windows overlapped on a GPU each would book the other's joules.
"""

from __future__ import annotations

import uuid

import pytest

from jouleroute.energy import EnergyConfig
from jouleroute.pool import CandidateSpec, ServedEnergy
from jouleroute.tournament import run_tournament
from jouleroute.tournament.lanes import metering_lanes
from tests.tournament.loopback_node import served_inputs

GPU_S = 0.15  # GPU time of one request


def served(candidate_id: str, base_url: str, exporter: str | None = None, gpus: list[int] | None = None,
           ) -> CandidateSpec:
    energy = ServedEnergy(exporter_url=exporter, gpus=gpus, j_per_output_token=0.1)
    return CandidateSpec(candidate_id=candidate_id, model=candidate_id, prompt_style="chat", answer_style="direct",
                         max_new_tokens=8, batch_size=2, base_url=base_url, energy=energy)


@pytest.mark.parametrize("gpus_a, gpus_b", [([0], [0]), ([0, 1], [1])], ids=["same-gpu", "overlapping-gpus"])
def test_two_servers_on_one_exporter_gpu_run_one_after_the_other(node, tmp_path, gpus_a, gpus_b):
    exporter = node.exporter()
    pool = [served("a", node.server(gpus_a, gpu_s=GPU_S), exporter, gpus_a),
            served("b", node.server(gpus_b, gpu_s=GPU_S), exporter, gpus_b)]
    inputs = served_inputs(tmp_path, pool, EnergyConfig(meter="estimate", idle_seconds=0.2))
    busy_before = node.busy_j
    profile = run_tournament(inputs, uuid.uuid4().hex[:12])
    assert set(profile["energy_source"]) == {"measured-nvml"}
    assert node.overlaps == 0, "a request ran on a GPU while another server's request ran there"
    # above idle, the windows hold exactly what the GPUs drew: no joule is booked by two windows
    assert profile["energy_net_j"].sum() == pytest.approx(node.busy_j - busy_before, rel=0.1)


def test_servers_on_other_gpus_or_exporters_keep_lanes_of_their_own():
    exporter, other = "http://node1:9400/metrics", "http://node2:9400/metrics"
    pool = [served("a", "http://node1:8001/v1", exporter, [0, 1]),
            served("b", "http://node1:8002/v1", exporter + "/", [1]),  # the same exporter, spelt with a slash
            served("c", "http://node1:8003/v1", exporter, [2]),
            served("d", "http://node2:8001/v1", other, [0]),  # gpu 0 of another node
            served("e", "http://node2:8001/v1", other, [3]),  # d's server: its requests share d's GPUs
            served("f", "http://node3:8001/v1"),  # modelled: no meter, a lane of its own server
            CandidateSpec(candidate_id="g", model="g", prompt_style="chat", answer_style="direct",
                          max_new_tokens=8, base_url="http://node4:8001/v1")]  # measured on the client
    lanes = metering_lanes(pool, "openai", "http://default:8000/v1")
    assert lanes["a"] == lanes["b"] and lanes["d"] == lanes["e"]
    assert len({lanes[c] for c in "acdf"}) == 4 and lanes["g"] == ""
    assert "gpu:http://node1:9400/metrics#1" in lanes["a"]
    assert set(metering_lanes(pool[-1:], "transformers", "")) == {"g"}  # a local model: metered by its process
    assert metering_lanes(pool[-1:], "transformers", "")["g"] == ""
