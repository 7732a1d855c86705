"""The one table of router families: name -> router class, its params sub-section, and what it can do.

A family registers itself at the bottom of its own module::

    register_family("knn", KNNRouter, rank=3)  # its params class: KNNRouter.config_class

The table fills itself on first use by importing every module of ``jouleroute.routing.baselines`` (but the
``_``-named helpers, which a family imports when it fits: reading the table stays cheap, no torch)
and every entry point of the group ``jouleroute.router_families`` (a family shipped by another
installed package). Everything that names families reads it: params validation (``baselines.families``
and each family's ``baselines.<name>`` sub-section), the evaluate stage, the champion's contenders,
the gateway's router kinds, the study report and the scaffold ablation (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from dataclasses import dataclass
from importlib.metadata import entry_points

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "jouleroute.router_families"
PACKAGE = "jouleroute.routing.baselines"


@dataclass(frozen=True)
class Family:
    """One router family.

    ``config``: the typed class of its params sub-section ``baselines.<name>`` (``None``: it has none).
    ``learned``: fitted on the train split with the common ``LearnedRouter`` arguments: evaluated over the
    λ sweep, a champion contender on val and servable by the gateway. ``rank`` orders the families in the
    default ``baselines.families`` and in reports (ties: the order they registered in).
    """

    name: str
    router: type
    config: type | None = None
    learned: bool = True
    rank: float = 100.0


_TABLE: dict[str, Family] = {}
_discovered = False


def register_family(name: str, router: type, *, learned: bool = True, rank: float = 100.0) -> Family:
    """Add a family to the table (called from the family's own module); a second module claiming the same
    name is an error, the same module imported twice is not. Its params sub-section is the router's
    ``config_class`` (none when it has none)."""
    family = Family(name, router, getattr(router, "config_class", None), learned, rank)
    known = _TABLE.get(name)
    if known is not None and (known.router.__module__, known.router.__qualname__) != (
            router.__module__, router.__qualname__):
        raise ValueError(f"router family '{name}' is registered twice: {known.router.__module__} and "
                         f"{router.__module__}")
    _TABLE[name] = family
    return family


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    _discovered = True  # set first: a family module importing this one must not recurse
    package = importlib.import_module(PACKAGE)
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):  # `_nets`, `_torch_fit`: a family's helpers, imported when it fits
            importlib.import_module(f"{PACKAGE}.{info.name}")
    for point in entry_points(group=ENTRY_POINT_GROUP):
        log.info("router family plugin %s (%s)", point.name, point.value)
        point.load()  # importing the module registers its family


def router_families() -> dict[str, Family]:
    """Every registered family, by rank (then registration order)."""
    _discover()
    order = list(_TABLE)
    return {f.name: f for f in sorted(_TABLE.values(), key=lambda f: (f.rank, order.index(f.name)))}


def family_names() -> tuple[str, ...]:
    return tuple(router_families())


def learned_families() -> tuple[str, ...]:
    """The families fitted on train: evaluated over the λ sweep, champion contenders, servable."""
    return tuple(name for name, f in router_families().items() if f.learned)


def get_family(name: str) -> Family:
    families = router_families()
    if name not in families:
        raise ValueError(f"unknown router family '{name}'; valid: {', '.join(families)}")
    return families[name]
