"""What NVML says about the GPUs Zeus meters: names, enforced power limits, driver version.

Zeus numbers GPUs as CUDA does: with ``CUDA_VISIBLE_DEVICES=2,3`` its GPU 0 is the node's GPU 2. NVML numbers
them physically. The facts recorded beside a measurement must be those of the GPU it was read on, so each CUDA
index is mapped through ``CUDA_VISIBLE_DEVICES`` first: an integer entry is an NVML index (as Zeus reads it), a
``GPU-<uuid>`` entry (whole or a unique prefix, as CUDA accepts) is looked up by UUID. A GPU that cannot be
mapped (a MIG slice, an index past the list, a UUID no GPU has) is recorded as unknown, never as another GPU.
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

UNKNOWN_GPU = "unknown"


def nvml_device_info(cuda_indices: list[int]) -> dict[str, object]:
    """Facts of the GPUs Zeus calls ``cuda_indices``; {} without NVML.

    ``power_limit_w`` (the summed enforced limits: no window's average power can exceed it) is set only when
    every GPU's limit is known.
    """
    if not cuda_indices:
        return {}
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as error:  # ImportError or NVMLError: no NVML here
        logger.debug("NVML unavailable for device info: %s", error)
        return {}
    try:
        nvml_indices = physical_gpu_indices(pynvml, cuda_indices, os.environ.get("CUDA_VISIBLE_DEVICES"))
        handles = [None if i is None else pynvml.nvmlDeviceGetHandleByIndex(i) for i in nvml_indices]
        # NVML reports milliwatts.
        limits = [None if h is None else pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0 for h in handles]
        info: dict[str, object] = {
            "gpu_nvml_indices": nvml_indices,
            "gpu_names": [UNKNOWN_GPU if h is None else _text(pynvml.nvmlDeviceGetName(h)) for h in handles],
            "gpu_power_limits_w": limits,
            "driver_version": _text(pynvml.nvmlSystemGetDriverVersion()),
        }
        if all(limit is not None for limit in limits):
            info["power_limit_w"] = float(sum(limits))  # type: ignore[arg-type]
        return info
    finally:
        pynvml.nvmlShutdown()


def physical_gpu_indices(pynvml, cuda_indices: list[int], visible: str | None) -> list[int | None]:
    """The NVML index of each CUDA index under ``visible`` (CUDA_VISIBLE_DEVICES); None where it says no GPU."""
    count = pynvml.nvmlDeviceGetCount()
    if visible is None:
        return [i if 0 <= i < count else None for i in cuda_indices]
    entries = [entry.strip() for entry in visible.split(",")]
    out = [_nvml_index(pynvml, entries[i], count) if 0 <= i < len(entries) else None for i in cuda_indices]
    for cuda_index, nvml_index in zip(cuda_indices, out):
        if nvml_index is None:
            logger.warning("CUDA_VISIBLE_DEVICES=%s names no NVML GPU for CUDA index %d: its name and power limit "
                           "are recorded as unknown", visible, cuda_index)
    return out


def _nvml_index(pynvml, entry: str, count: int) -> int | None:
    try:
        index = int(entry)
    except ValueError:
        index = None
    if index is not None:
        return index if 0 <= index < count else None
    if not entry.startswith("GPU-"):
        return None  # a MIG slice or something CUDA itself would not read
    matches = [i for i in range(count)
               if _text(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))).startswith(entry)]
    return matches[0] if len(matches) == 1 else None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
