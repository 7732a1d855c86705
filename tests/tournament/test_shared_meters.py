"""Dask workers that would meter each other's jobs are refused before any starts (lanes.check_meters_apart).

A LocalCluster's workers share this node: NVML and RAPL count the whole device, so two workers' windows
would each book the other's joules. NVML is stubbed at its boundary (tests/energy/conftest.py: no GPU here);
Zeus and the refusal run for real. The CPU-time estimate is per process, so several workers stay allowed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from jouleroute.config import load_params
from jouleroute.tournament.lanes import SharedMeterError, check_meters_apart
from tests.energy.conftest import fake_nvml  # noqa: F401  (NVML stubbed at its boundary)
from tests.pipeline.conftest import tiny_params

pytestmark = pytest.mark.timeout(120)


def params_file(tmp_path: Path, meter: str = "auto", served: bool = False) -> Path:
    params = tiny_params(tmp_path / "model")
    params["energy"] = {"meter": meter, "idle_seconds": 0}
    if served:  # two servers metered on their node's exporter
        params["backend"] = {"kind": "openai"}
        params["models"]["srv"] = {"source": "served", "served_name": "srv"}
        for i, entry in enumerate(params["pool"]):
            entry |= {"model": "srv", "answer_style": "direct", "base_url": f"http://node:800{i}/v1",
                      "energy": {"exporter_url": "http://node:9400/metrics", "gpus": [i], "j_per_output_token": 0.1}}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


def test_two_local_workers_on_one_gpu_are_refused_in_one_line(tmp_path, fake_nvml):  # noqa: F811
    from flows.tournament import run_on_dask

    path = params_file(tmp_path)
    with pytest.raises(SharedMeterError) as refused:  # before a cluster or a flow starts
        run_on_dask(str(path), str(tmp_path), n_workers=2)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("params.yaml: energy.meter 'auto'")
    assert "--dask-workers 1" in message and "CUDA_VISIBLE_DEVICES" in message
    check_meters_apart(*_sections(path), workers_on_node=1, threads_per_worker=1)  # one worker: its own GPU


def test_two_threads_in_one_worker_are_refused_whatever_the_meter(tmp_path):
    from flows.tournament import run_on_dask

    path = params_file(tmp_path, meter="estimate")
    with pytest.raises(SharedMeterError, match="2 threads per Dask worker"):
        run_on_dask(str(path), str(tmp_path), n_workers=1, threads_per_worker=2)


def test_estimate_workers_and_exporter_metered_pools_may_share_a_node(tmp_path, fake_nvml):  # noqa: F811
    # the estimate is this process's CPU time: another worker process's work is never in its windows
    check_meters_apart(*_sections(params_file(tmp_path, meter="estimate")), workers_on_node=4, threads_per_worker=1)
    # served on an exporter: nothing is metered in the worker, whatever the client's own meter
    check_meters_apart(*_sections(params_file(tmp_path, served=True)), workers_on_node=2, threads_per_worker=2)


def _sections(path: Path):
    params = load_params(path)
    return params.pool, params.backend.kind, params.energy
