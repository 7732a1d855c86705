"""Baseline routers by name: one function that builds (and trains) any registered family.

Names are the families of ``BaselinesConfig.families``, registered in ``jouleroute.routing.families``;
``always`` takes its candidate after a colon (``always:<candidate_id>``), and ``baseline_names``
expands a family list into the concrete router names for a pool.
"""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

import pandas as pd

from jouleroute.energy.base import Meter
from jouleroute.energy.config import EnergyPolicy
from jouleroute.routing.base import Router
from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.routing.baselines.embeddings import Embedder, build_embedder
from jouleroute.routing.baselines.learned import LearnedRouter
from jouleroute.routing.baselines.simple import RuleSetup
from jouleroute.routing.families import get_family, router_families
from jouleroute.routing.scores import DEFAULT_LAM

log = logging.getLogger(__name__)


def baseline_names(families: Sequence[str], candidates: Sequence[str]) -> list[str]:
    """Concrete router names: each family, with ``always`` expanded to one name per candidate."""
    names: list[str] = []
    for family in families:
        names += [f"always:{c}" for c in candidates] if family == "always" else [family]
    return names


def _learned(
    family: str, candidates: Sequence[str], cfg: BaselinesConfig, embedder: Embedder, meter: Meter | None,
    energy_norm: str, lam: float,
) -> LearnedRouter:
    return get_family(family).router(candidates, embedder, cfg.section(family),  # its params: baselines.<family>
                                     lam=lam, energy_norm=energy_norm, meter=meter, seed=cfg.seed,
                                     overhead_sample=cfg.overhead_sample, strip_scaffold=cfg.strip_scaffold)


def candidate_order(profile: pd.DataFrame, pool_ids: Sequence[str], profile_source: str) -> list[str]:
    """The profile's candidates in the order every router is built with: the pool's for a tournament profile,
    sorted otherwise (a replayed or imported profile has no pool order)."""
    present = set(profile["candidate_id"])
    order = pool_ids if profile_source == "tournament" else sorted(present)
    return [c for c in order if c in present]


def sample_train(profile: pd.DataFrame, cfg: BaselinesConfig) -> pd.DataFrame:
    """The profile with at most ``cfg.max_train_queries`` queries of ``cfg.train_split`` (seeded sample)."""
    split, limit = cfg.train_split, cfg.max_train_queries
    ids = pd.Series(sorted(profile.loc[profile["split"] == split, "query_id"].unique()))
    if limit is None or len(ids) <= limit:
        return profile
    keep = set(ids.sample(n=limit, random_state=cfg.seed))
    return profile[(profile["split"] != split) | profile["query_id"].isin(keep)]


def build_router(
    name: str,
    profile_train: pd.DataFrame,
    queries_train: pd.DataFrame,
    candidates: Sequence[str],
    cfg: BaselinesConfig,
    meter: Meter | None = None,
    *,
    mix: Mapping[str, float] | None = None,
    eval_profile: pd.DataFrame | None = None,
    embedder: Embedder | None = None,
    energy: EnergyPolicy = EnergyPolicy(),
    lam: float = DEFAULT_LAM,
) -> Router:
    """Build the baseline called ``name`` for the pool ``candidates``; learned ones are trained here.

    - ``always:<candidate_id>``: always that candidate.
    - ``random``: random at ``mix`` (candidate -> share; pass the learned router's
      mix, see ``simple.mix_of``); without one, a uniform mix over the pool.
    - ``oracle``: needs ``eval_profile``, the profile rows of the queries it will route.
    - a learned family (``knn``, ``mlp``, ``mf``, any registered one): fit on the ``cfg.train_split`` rows of ``profile_train``
      with questions from ``queries_train``. ``embedder`` overrides ``cfg.embedding``
      (tests inject a fast one); ``meter`` measures their routing overhead.

    ``energy`` (params ``energy_policy``): the profile column the learned ones and the oracle read, and
    the norm that scales the learned ones' predicted joules. ``lam``: the λ of ``route`` when it is given
    none (params ``router.lam``, the reference λ; evaluation decides at every λ of its sweep, and the deployed λ is
    chosen on selection data for ``router.target``).
    """
    family, _, argument = name.partition(":")
    if family not in router_families():
        valid = ", ".join(router_families())
        raise ValueError(f"unknown router '{name}'; valid: {valid} (always as always:<candidate_id>)")
    if not get_family(family).learned:  # a rule: its class builds it from what it reads (simple.RuleSetup)
        return get_family(family).router.from_setup(RuleSetup(
            argument, candidates, profile_train, seed=cfg.seed, train_split=cfg.train_split,
            energy_column=energy.column, mix=mix, eval_profile=eval_profile))
    if argument:
        raise ValueError(f"router '{family}' takes no ':{argument}' argument")
    router = _learned(family, candidates, cfg, embedder or build_embedder(cfg.embedding), meter, energy.norm, lam)
    return router.fit(profile_train, queries_train, energy_column=energy.column, split=cfg.train_split)
