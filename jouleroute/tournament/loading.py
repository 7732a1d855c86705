"""The models a process holds for the tournament: loaded once per run, kept, metered apart from answering.

On a cluster, each job used to load its candidate's model again (42 loads for 42
jobs of a two-model pool); on a GPU node a large model takes minutes to load. Now a
process (the serial stage, or one Dask worker) keeps what it loaded for the rest of
the run, keyed by the model's weights revision and the backend settings, so two
candidates asking the same model share one load. At most
``tournament.models_per_worker`` models stay loaded (the least recently used is
closed first, freeing its GPU memory); jobs come grouped by model, so a process
meets each model once.

Loading and the warm-up that follows it run in their own meter windows, with the
meter's label. They are reported as records (``phase`` ``load`` or ``warmup``), in
the first shard a job writes after them and in the run state, and never added to a
query's ``energy_j``.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from jouleroute.backends import Backend
from jouleroute.models import MANIFEST_NAME, model_location
from jouleroute.pool import ModelSpec
from jouleroute.provenance import stable_hash


def model_revision(name: str, spec: ModelSpec, models_dir: Path) -> str:
    """What identifies the weights: the pinned revision, the conversion manifest, or the folder's files."""
    if spec.revision:
        return spec.revision
    location = Path(model_location(name, spec, models_dir))
    manifest = location / MANIFEST_NAME
    if manifest.is_file():
        return stable_hash(manifest.read_text())
    if location.is_dir():
        return stable_hash(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                                  for p in location.iterdir() if p.is_file()))
    return stable_hash(str(location))  # a hub id or a served name: the name is all there is


@dataclass
class Held:
    backend: Backend
    warmed: set[str] = field(default_factory=set)  # candidates already warmed up on it


class ModelCache:
    """What this process holds for the current run; one instance per process (``PROCESS_MODELS``)."""

    def __init__(self) -> None:
        self.run_id: str | None = None
        self.held: OrderedDict[str, Held] = OrderedDict()
        self.unreported: list[dict] = []  # load/warm-up records no shard has carried yet
        self.loads = 0  # models loaded by this process during the current run
        self.lock = threading.RLock()  # a worker with several threads must not load one model twice

    def begin_run(self, run_id: str) -> None:
        """A new run starts from nothing: idle power is measured before any model is loaded."""
        if run_id != self.run_id:
            self.release()
            self.run_id, self.unreported, self.loads = run_id, [], 0

    def get(self, key: str, capacity: int, build: Callable[[], Backend], meter, record: dict) -> Held:
        """The model for ``key``: kept from an earlier job, or built now in a metered window."""
        with self.lock:
            if key in self.held:
                self.held.move_to_end(key)
                return self.held[key]
            while len(self.held) >= capacity:
                _, old = self.held.popitem(last=False)
                old.backend.close()  # frees its memory (GPU included) before the next model arrives
            with meter.window() as box:
                backend = build()
            self.held[key] = Held(backend)
            self.loads += 1
            self.note("load", box[0], record)
            return self.held[key]

    def note(self, phase: str, measurement, record: dict) -> None:
        self.unreported.append({**record, "phase": phase, "time_s": float(measurement.time_s),
                                "energy_j": float(measurement.energy_j), "energy_source": measurement.source,
                                "worker": worker_name(), "run_id": self.run_id})

    def take_records(self) -> list[dict]:
        records, self.unreported = self.unreported, []
        return records

    def release(self) -> None:
        """Close every held model (end of a serial run, end of a Dask run, a new run)."""
        with self.lock:
            while self.held:
                _, held = self.held.popitem(last=False)
                held.backend.close()


PROCESS_MODELS = ModelCache()


def release_models() -> int:
    """Close this process's models; returns how many it loaded in the run (``client.run`` calls this on workers)."""
    PROCESS_MODELS.release()
    return PROCESS_MODELS.loads


def loaded_count() -> int:
    """How many models this process loaded in its current (or last) run."""
    return PROCESS_MODELS.loads


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def loading_summary(records: list[dict]) -> dict:
    """Totals of a run's load and warm-up records, per phase, with their energy label(s)."""
    out: dict = {"note": "model loading and warm-up are metered in their own windows; no query's energy_j "
                         "includes them"}
    for phase in ("load", "warmup"):
        rows = [r for r in records if r["phase"] == phase]
        out[phase] = {"count": len(rows), "time_s": round(sum(r["time_s"] for r in rows), 3),
                      "energy_j": round(sum(r["energy_j"] for r in rows), 3),
                      "energy_source": ",".join(sorted({r["energy_source"] for r in rows})) or None,
                      "per_worker_model": _counts(rows)}
    return out


def _counts(rows: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        key = f"{r['worker']} {r['model']}"
        counts[key] = counts.get(key, 0) + 1
    return counts
