"""Where an output came from (git sha, params hash, hardware, library versions), and the one seeding helper."""

from __future__ import annotations

import contextlib
import hashlib
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator

_LIBRARIES = (
    "torch", "transformers", "trl", "peft", "zeus", "nvidia-ml-py", "mlflow", "dvc",
    "great-expectations", "prefect", "pandas", "pyarrow", "vllm",
)


def git_sha(repo: Path | None = None) -> str:
    """The checked-out commit, with ``-dirty`` when the work tree has changes; ``unknown`` outside git."""
    cwd = str(repo) if repo else None
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def stable_hash(obj: Any, length: int = 12) -> str:
    """Hash of a JSON-serialisable object, independent of key order."""
    blob = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"machine": platform.machine(), "system": platform.system(), "node_cpus": _cpu_count()}
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="ignore").splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    try:
        import torch

        info["cuda_available"] = bool(torch.cuda.is_available())
        if info["cuda_available"]:
            info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        pass
    return info


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def seed_everything(seed: int) -> None:
    """Python's, NumPy's and torch's random generators (CPU and every GPU), in one call: the first line of
    every stage that draws random numbers."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """``seed_everything`` for the block only: what runs inside is reproducible (a baseline's dropout and
    init), and the caller's Python, NumPy and torch CPU generators continue afterwards as if it never ran."""
    import random

    import numpy as np
    import torch

    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):  # CPU only: forking CUDA's would initialize it for nothing
        try:
            seed_everything(seed)
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)
