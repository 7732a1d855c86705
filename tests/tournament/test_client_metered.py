"""Served candidates measured on the client (``energy.served_client_estimate``): the CPU-time estimate of this
process, labelled ``estimated``, in windows that nothing else in the process runs beside.

The servers are real HTTP servers on loopback in this process (loopback_node.py), each burning a known CPU
time per request in its handler thread, which the estimate (this process's CPU time) sees; the OpenAI client
and ``run_tournament`` are the real ones.
"""

from __future__ import annotations

import uuid

from jouleroute.energy import EnergyConfig
from jouleroute.pool import CandidateSpec, ServedEnergy
from jouleroute.tournament import run_tournament
from tests.energy.conftest import fake_nvml  # noqa: F401  (NVML stubbed at its boundary: no GPU here)
from tests.tournament.loopback_node import served_inputs

CPU_S = 0.15  # CPU time a server burns per request
WATTS = 4.0  # the estimate's W per busy core


def client_metered(candidate_id: str, base_url: str) -> CandidateSpec:
    return CandidateSpec(candidate_id=candidate_id, model=candidate_id, prompt_style="chat", answer_style="direct",
                         max_new_tokens=8, batch_size=2, base_url=base_url)


def test_client_metered_windows_hold_only_their_own_requests_cpu(node, tmp_path):
    exporter = node.exporter()
    pool = [client_metered("a", node.server([0], cpu_s=CPU_S)), client_metered("b", node.server([0], cpu_s=CPU_S)),
            # on an exporter: a lane of its own, whose server burns this process's CPU too
            CandidateSpec(candidate_id="c", model="c", prompt_style="chat", answer_style="direct", max_new_tokens=8,
                          batch_size=2, base_url=node.server([1], cpu_s=CPU_S),
                          energy=ServedEnergy(exporter_url=exporter, gpus=[1], j_per_output_token=0.1))]
    energy = EnergyConfig(meter="estimate", cpu_watts_per_core=WATTS, idle_seconds=0, served_client_estimate=True)
    profile = run_tournament(served_inputs(tmp_path, pool, energy), uuid.uuid4().hex[:12])
    client = profile[profile["candidate_id"].isin(["a", "b"])]
    assert set(client["energy_source"]) == {"estimated"}
    own = len(client) * CPU_S * WATTS  # each request's CPU, burnt while its window is open
    # the client's own HTTP work adds a little; another lane's requests inside the window would add 2x
    assert own <= client["energy_j"].sum() <= 1.3 * own


def test_a_served_candidate_measured_on_a_client_with_a_gpu_is_labelled_estimated(  # noqa: F811
        node, tmp_path, fake_nvml):
    pool = [client_metered("a", node.server([0]))]
    energy = EnergyConfig(meter="auto", idle_seconds=0, min_window_s=0, served_client_estimate=True)
    profile = run_tournament(served_inputs(tmp_path, pool, energy), uuid.uuid4().hex[:12])
    # the client's GPU says nothing about the server's: the figure is the client's CPU time, said so
    assert set(profile["energy_source"]) == {"estimated"}

