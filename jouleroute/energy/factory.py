"""Pick a meter from config: measured (Zeus) where a counter is readable, a labelled estimate otherwise."""

from __future__ import annotations

import glob
import logging
import os

from jouleroute.energy.base import Meter
from jouleroute.energy.config import EnergyConfig
from jouleroute.energy.estimate import EstimateMeter
from jouleroute.energy.zeus_meter import MeterUnavailableError, ZeusMeter, missing_counters_message

logger = logging.getLogger(__name__)

# Zeus also reads RAPL from this bind-mount path inside containers.
RAPL_DIRS = ("/sys/class/powercap/intel-rapl", "/zeus_sys/class/powercap/intel-rapl")


def nvml_usable() -> bool:
    """True when nvidia-ml-py loads the driver and sees at least one GPU."""
    try:
        import pynvml
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # NVMLError_LibraryNotFound etc.: no driver here
        return False
    try:
        return pynvml.nvmlDeviceGetCount() > 0
    finally:
        pynvml.nvmlShutdown()


def rapl_usable(rapl_dirs: tuple[str, ...] = RAPL_DIRS) -> bool:
    """True when some RAPL package counter exists and this user can read it."""
    for rapl_dir in rapl_dirs:
        for counter in glob.glob(os.path.join(rapl_dir, "intel-rapl:*", "energy_uj")):
            if os.access(counter, os.R_OK):
                return True
    return False


def make_meter(cfg: EnergyConfig) -> Meter:
    """``auto``: Zeus if NVML or RAPL is usable, else the estimate (with a warning)."""
    if cfg.meter == "estimate":
        return EstimateMeter(cfg.cpu_watts_per_core)
    usable = nvml_usable() or rapl_usable()
    if cfg.meter == "zeus":
        if not usable:
            raise MeterUnavailableError(missing_counters_message())
        return ZeusMeter(cfg.gpu_indices, cfg.min_window_s)
    if usable:
        try:
            return ZeusMeter(cfg.gpu_indices, cfg.min_window_s)
        except MeterUnavailableError as error:
            logger.warning("Zeus could not read a counter (%s); falling back to the estimate", error)
    logger.warning(
        "no GPU (NVML) and no readable RAPL counter: energy figures will be ESTIMATES from process CPU time "
        "x %.3f W per core, labelled 'estimated'",
        cfg.cpu_watts_per_core,
    )
    return EstimateMeter(cfg.cpu_watts_per_core)
