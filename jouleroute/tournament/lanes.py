"""Which tournament jobs may run at once: never two whose meter windows would read the same counter.

A window books everything its counter saw. Two windows open at once on one counter each book the other's
joules, so the jobs behind them must run one after the other:

- a served candidate metered by an exporter: its counter is the exporter's GPUs (``energy.exporter_url``,
  ``energy.gpus``). Candidates whose GPU sets overlap on one exporter (``[0]`` and ``[0]``, ``[0, 1]`` and
  ``[1]``), and candidates of one server, form one lane (``metering_lanes``); lanes run at once.
- a job metered by this process (a local model, or a served candidate measured on the client with
  ``energy.served_client_estimate``): no lane here; ``run.py`` runs those jobs alone, one after the other.
  On Dask each worker process meters its own jobs, so a worker runs one job at a time, and only a
  process-wide counter (the estimate's CPU time) may be shared by several workers on one node: NVML and
  RAPL count the whole device (``check_meters_apart``).
"""

from __future__ import annotations

from typing import Sequence

from jouleroute.energy import EnergyConfig, nvml_usable, rapl_usable
from jouleroute.pool import CandidateSpec


class SharedMeterError(ValueError):
    """Workers of one process or one node would meter each other's work; the message says what to run instead."""


def served_on_its_node(backend_kind: str, candidate: CandidateSpec) -> bool:
    """Metered on its GPU node (or modelled), never by this process: an openai candidate with `energy`."""
    return backend_kind == "openai" and candidate.energy is not None


def server_of(candidate: CandidateSpec, default_url: str) -> str:
    """The server a candidate's requests go to."""
    return (candidate.base_url or default_url).rstrip("/")


def metering_lanes(pool: Sequence[CandidateSpec], backend_kind: str, default_url: str) -> dict[str, str]:
    """Lane of each served candidate (candidate_id -> lane name); ``""`` for the jobs this process meters.

    Candidates are joined when they share a server or one exporter GPU; a lane is a joined group,
    named by what it holds (its servers and exporter GPUs), so every process computes the same name.
    """
    parent: dict[str, str] = {}

    def root(node: str) -> str:
        while parent.setdefault(node, node) != node:
            node = parent[node]
        return node

    members: dict[str, list[str]] = {}
    for candidate in pool:
        if not served_on_its_node(backend_kind, candidate):
            continue
        energy = candidate.energy
        nodes = [f"server:{server_of(candidate, default_url)}"]
        if energy.exporter_url is not None:
            nodes += [f"gpu:{energy.exporter_url.rstrip('/')}#{gpu}" for gpu in energy.gpus]
        for node in nodes[1:]:
            parent[root(node)] = root(nodes[0])
        members[candidate.candidate_id] = nodes
    groups: dict[str, set[str]] = {}
    for nodes in members.values():
        groups.setdefault(root(nodes[0]), set()).update(nodes)
    names = {top: " ".join(sorted(nodes)) for top, nodes in groups.items()}
    return {c.candidate_id: names[root(members[c.candidate_id][0])] if c.candidate_id in members else ""
            for c in pool}


def meter_counts_the_device(energy: EnergyConfig) -> bool:
    """Whether this process's meter (``make_meter``) reads a device-wide counter (NVML or RAPL), not its CPU time."""
    return energy.meter == "zeus" or (energy.meter == "auto" and (nvml_usable() or rapl_usable()))


def check_meters_apart(pool: Sequence[CandidateSpec], backend_kind: str, energy: EnergyConfig,
                       workers_on_node: int, threads_per_worker: int, params_name: str = "params.yaml") -> None:
    """Refuse workers that would meter each other's jobs (``SharedMeterError``, one line).

    Only jobs metered by a worker's own process count (a served candidate on an exporter is metered on its
    node, and ``metering_lanes`` keeps its windows apart). Two threads of one process share its meter,
    whatever the meter. Two workers on one node share an NVML or RAPL counter (device-wide); the estimate's
    CPU time is per process, so several estimate workers are fine.
    """
    if all(served_on_its_node(backend_kind, c) for c in pool):
        return
    if threads_per_worker > 1:
        raise SharedMeterError(
            f"{params_name}: {threads_per_worker} threads per Dask worker would run two jobs in one process, and "
            "each window of its meter would book the other's energy; use 1 thread per worker (more workers instead)")
    # a served candidate measured on the client always uses the CPU-time estimate (run.py)
    if workers_on_node > 1 and backend_kind != "openai" and meter_counts_the_device(energy):
        raise SharedMeterError(
            f"{params_name}: energy.meter {energy.meter!r} reads NVML/RAPL, which count the whole node's devices, "
            f"so {workers_on_node} workers on this node would each book the others' joules; run one worker "
            "(--dask-workers 1), or one worker per GPU with its own CUDA_VISIBLE_DEVICES on a cluster "
            "(--dask-address, docs/cluster.md)")
