"""The champion as an artifact: the router the evaluate stage chose on val, saved as it was fitted, with its λ.

``<evaluate_dir>/champion/`` holds

- ``champion.json``: the family and checkpoint, the deployed λ (chosen on selection data for ``router.target``,
  evaluation/deployed.py; ``router.lam`` is not it),
  the λ range it may be asked at, an LM router's checkpoint folder and kNN evidence, the encoder config of
  a learned baseline, and the evaluate run that chose it;
- ``router.pkl``: a learned baseline as evaluate fitted it (its encoder and meter detached: whoever loads
  it attaches its own), or ``knn.pkl``: the kNN whose evidence an LM champion blends in;
- ``test_decisions.parquet``: evaluate's choice per test query at the deployed λ, when it scored the
  champion on test (what the gateway must reproduce).

The folder is part of the evaluate stage's DVC output and is logged to the evaluate run, where the registry's
alias ``champion`` points; ``jouleroute serve`` loads it and never refits. The pickles are this project's own
outputs: load only a workspace you trust, as with any checkpoint.
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import pandas as pd

from jouleroute.atomic import atomic_write_text

RECORD = "champion.json"
DECISIONS = "test_decisions.parquet"


def save_champion(folder: Path, record: dict, fitted: dict[str, object], decisions: pd.DataFrame | None) -> Path:
    """Replace ``folder`` with the champion: ``record`` as champion.json, each fitted router as ``<key>.pkl``."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for key, router in fitted.items():
        detached = {"embedder": getattr(router, "embedder", None), "meter": getattr(router, "meter", None)}
        for attr in detached:
            setattr(router, attr, None)
        try:
            (folder / f"{key}.pkl").write_bytes(pickle.dumps(router))
        finally:
            for attr, value in detached.items():
                setattr(router, attr, value)
    if decisions is not None:
        decisions.to_parquet(folder / DECISIONS, index=False)
    atomic_write_text(folder / RECORD, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return folder


def clear_champion(folder: Path, why: str) -> None:
    """No champion this run: a stale one from an earlier run must not be served. The folder stays (a DVC
    output), holding only a record that says why there is none."""
    save_champion(folder, {"family": None, "why": why}, {}, None)


def read_champion(folder: Path) -> dict | None:
    """The champion's record; ``None`` when the folder holds none (or says there is none)."""
    path = folder / RECORD
    record = json.loads(path.read_text()) if path.is_file() else None
    return record if record and record.get("family") else None


def load_fitted(folder: Path, key: str, embedder, meter=None):
    """The fitted router saved as ``<key>.pkl``, with ``embedder`` and ``meter`` attached."""
    path = folder / f"{key}.pkl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the champion's fitted router is missing; rerun `dvc repro evaluate`")
    router = pickle.loads(path.read_bytes())
    router.embedder, router.meter = embedder, meter
    return router
