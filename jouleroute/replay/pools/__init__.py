"""The one table of public outcome pools: each pool of the data root declared once, in its own module.

A pool's module (``jouleroute/replay/pools/<name>.py``) holds its reader (how its files become the table
`jouleroute import` reads, its split rule included) and registers itself at the bottom::

    register_pool(PublicPool(name="mypool", folder="outcomes/mypool", study="mypool", ...))

The table fills itself on first use by importing every module of this package (but ``_``-named helpers).
Everything that names a pool reads it: params validation (``public_pool.pool``), the `outcomes` stage (the
reader), the study page (its title and its outcomes' origin), scripts/public_pool_studies.py, which writes
each pool's study preset (studies/<study>/) from the declaration, and scripts/data_manifest.py, which writes its
folder's entry of the data manifest (docs/architecture.md, "Adding a pool").
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd


@dataclass
class PoolTable:
    table: pd.DataFrame  # the import table
    notes: dict = field(default_factory=dict)  # what the report says about how it was built


@dataclass(frozen=True)
class PublicPool:
    """One public outcome pool.

    ``name``: its ``public_pool.pool`` value. ``folder``: its files, relative to the data root (``paths.data_root``).
    ``study``: its study's folder under studies/. ``title``: its study page's title; ``origin``: whose outcomes
    the page says they are; ``what``: what the study routes, for the generated presets' header. ``split``: how
    its queries are split, in words (the reader applies it). ``models``: the pool's model name -> the params
    entry of its candidate (candidate id, ML.ENERGY reference, workload, reason; see :func:`mapped`). ``read``:
    the pool's files -> :class:`PoolTable`, given the ``public_pool`` params and the repository root.
    ``source``: the folder's entry in the data manifest (origin, licence, note; scripts/data_manifest.py).
    """

    name: str
    folder: str
    study: str
    title: str
    origin: str
    what: str
    split: str
    models: dict[str, dict]
    read: Callable[[Any, Path], PoolTable]
    source: dict[str, str] = field(default_factory=dict)


_TABLE: dict[str, PublicPool] = {}
_discovered = False


def mapped(candidate_id: str, reference: str, reason: str, workload: str = "chat", **extra) -> dict:
    """A pool model's params entry: its candidate id, the ML.ENERGY reference that stands in for it and why."""
    return {"candidate_id": candidate_id, "reference": reference, "workload": workload, **extra, "reason": reason}


def register_pool(pool: PublicPool) -> PublicPool:
    """Add a pool to the table (from its own module); a second module claiming the same name is an error."""
    known = _TABLE.get(pool.name)
    if known is not None and known.read.__module__ != pool.read.__module__:
        raise ValueError(f"public pool '{pool.name}' is declared twice: {known.read.__module__} and "
                         f"{pool.read.__module__}")
    _TABLE[pool.name] = pool
    return pool


def public_pools() -> dict[str, PublicPool]:
    """Every declared pool, by name."""
    global _discovered
    if not _discovered:
        _discovered = True
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if not info.name.startswith("_"):
                importlib.import_module(f"{__name__}.{info.name}")
    return dict(sorted(_TABLE.items()))


def get_pool(name: str) -> PublicPool:
    pools = public_pools()
    if name not in pools:
        raise ValueError(f"unknown public pool '{name}'; valid: {', '.join(pools)} (jouleroute/replay/pools/)")
    return pools[name]


def check_models(available: list[str], cfg, where: str) -> None:
    """Every model the params map must have outcomes in the pool's files."""
    unknown = [m for m in cfg.models if m not in available]
    if unknown:
        raise ValueError(f"{where}: public_pool.models {unknown} have no outcomes there; models in it: {available}")
