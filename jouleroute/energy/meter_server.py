"""``jouleroute meter``: a Prometheus exporter of a node's energy counter, for nodes without DCGM's exporter.

It serves Zeus's cumulative counter per device in DCGM's format: ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``
(millijoules, label ``gpu``), read when scraped. On a GPU node that is NVML's total-energy counter per GPU
(``measured-nvml``); without a GPU, RAPL's package (+ DRAM) counter per CPU socket, listed under ``gpu`` =
the socket index so that readers need one rule (``measured-rapl``). ``jouleroute_meter_info`` states which.
It is declared a gauge: prometheus-client would rename a counter ``..._total``, and DCGM's name has no
suffix; readers (``jouleroute.energy.exporter``) accept both.

A counter source is anything with ``source`` and ``read_mj() -> {index: millijoules}``: ``zeus_counter``
here, or one named with ``--counter MODULE:FACTORY`` (tests stub the NVML boundary this way).
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Callable, Protocol

from jouleroute.energy.exporter import METER_INFO_METRIC

logger = logging.getLogger(__name__)
METRIC = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


class EnergyCounter(Protocol):
    source: str  # measured-nvml | measured-rapl

    def read_mj(self) -> dict[int, float]: ...


class ZeusCounter:
    """NVML's counter per GPU through Zeus, else RAPL's per CPU package (+ DRAM where readable)."""

    def __init__(self) -> None:
        from jouleroute.energy.factory import nvml_usable, rapl_usable
        from jouleroute.energy.zeus_meter import MeterUnavailableError

        if nvml_usable():
            from zeus.device import get_gpus

            self._gpus, self.source = get_gpus(), "measured-nvml"
            self._indices = list(range(len(self._gpus)))
        elif rapl_usable():
            from zeus.device.cpu import get_cpus

            self._cpus, self.source = get_cpus(), "measured-rapl"
            self._indices = list(range(len(self._cpus)))
        else:
            raise MeterUnavailableError(
                "nothing to export: NVML finds no NVIDIA GPU (needs the driver and nvidia-ml-py) and no RAPL "
                "counter is readable (/sys/class/powercap/intel-rapl absent or root-only). Run it on the GPU node, "
                "or make RAPL readable (`sudo chmod -R a+r /sys/class/powercap/intel-rapl`)")

    def read_mj(self) -> dict[int, float]:
        if self.source == "measured-nvml":
            return {i: float(self._gpus.get_total_energy_consumption(i)) for i in self._indices}
        out = {}
        for i in self._indices:
            reading = self._cpus.get_total_energy_consumption(i)
            out[i] = float(reading.cpu_mj) + float(reading.dram_mj or 0.0)
        return out


def load_counter(spec: str | None, options: dict[str, str]) -> EnergyCounter:
    """``None``: Zeus. ``MODULE:FACTORY``: ``FACTORY(**options)`` from an importable module."""
    if spec is None:
        return ZeusCounter()
    module, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"--counter {spec!r}: expected MODULE:FACTORY")
    factory: Callable[..., EnergyCounter] = getattr(importlib.import_module(module), name)
    return factory(**options)


class _Collector:
    def __init__(self, counter: EnergyCounter) -> None:
        self.counter = counter
        self.lock = threading.Lock()

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        with self.lock:
            readings = self.counter.read_mj()
        energy = GaugeMetricFamily(METRIC, "Total energy consumption since boot (in mJ).", labels=["gpu"])
        for index, mj in sorted(readings.items()):
            energy.add_metric([str(index)], mj)
        yield energy
        yield InfoMetricFamily(METER_INFO_METRIC.removesuffix("_info"), "What jouleroute meter reads",
                               value={"source": self.counter.source, "counter": type(self.counter).__name__})


def serve_meter(counter: EnergyCounter, host: str = "127.0.0.1", port: int = 9400):
    """Serve ``/metrics`` in a background thread; returns ``(server, thread)`` (``server.shutdown()`` then
    ``server.server_close()`` stop it)."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    registry.register(_Collector(counter))
    server, thread = start_http_server(port, addr=host, registry=registry)
    logger.info("jouleroute meter: %s counters of %d device(s) on http://%s:%d/metrics", counter.source,
                len(counter.read_mj()), host, server.server_port)
    return server, thread
