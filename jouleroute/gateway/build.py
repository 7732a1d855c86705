"""Build a gateway from params: the router, the upstreams and the keys its config names.

With an empty ``gateway`` section this is the embedded default of ``jouleroute serve``: the
pool's candidates generated in-process (one loaded model per pool model) behind the router the
evaluate stage chose on val and registered in MLflow under the alias ``champion`` (any family;
the trained LM router of ``paths.grpo_dir/model`` when the store has no champion), energy metered
with the ``energy`` section's meter. A ``gateway.router`` in the config always wins.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Protocol, Sequence

from jouleroute.backends import BackendConfig
from jouleroute.energy import EnergyConfig, make_meter
from jouleroute.energy.config import EnergyPolicy
from jouleroute.energy.base import Meter
from jouleroute.gateway.auth import KeyStore
from jouleroute.gateway.config import LOOPBACK_HOSTS, GatewayConfig, GatewayRouterConfig, UpstreamConfig
from jouleroute.gateway.energy import ExpectedEnergy
from jouleroute.gateway.routers import GatewayRouter, ScoringGatewayRouter, lm_gateway_router
from jouleroute.gateway.service import Gateway
from jouleroute.gateway.measured import MeasuredEnergy
from jouleroute.gateway.remote import RemoteUpstream
from jouleroute.gateway.upstreams import InProcessUpstream, Upstream
from jouleroute.paths import PathsConfig
from jouleroute.pool import CandidateSpec, ModelSpec
from jouleroute.provenance import stable_hash
from jouleroute.routing.baselines.config import BaselinesConfig
from jouleroute.routing.lm.config import RouterConfig

logger = logging.getLogger(__name__)


class TrainedRange(Protocol):
    lambdas: Sequence[float]


class Tracking(Protocol):
    enabled: bool
    experiment: str


class Params(Protocol):
    """What building a gateway reads of the params file (``jouleroute.config.Params`` has it all). The
    typed params file sits above every package, so the gateway names what it needs instead of importing it."""

    paths: PathsConfig
    pool: Sequence[CandidateSpec]
    models: dict[str, ModelSpec]
    backend: BackendConfig
    energy: EnergyConfig
    energy_policy: EnergyPolicy  # the norm, column and mixing rule the baselines are fitted with
    router_data: TrainedRange  # the λ range the router was trained on
    router: RouterConfig
    baselines: BaselinesConfig
    gateway: GatewayConfig
    tracking: Tracking  # where the champion is registered

    @property
    def candidate_ids(self) -> list[str]: ...


def check_exposure(cfg: GatewayConfig, keys: KeyStore) -> None:
    """Refuse to serve an open gateway beyond loopback unless the config says it is meant."""
    if not keys.required and cfg.host not in LOOPBACK_HOSTS and not cfg.auth.allow_anonymous:
        raise ValueError(f"gateway.host is {cfg.host!r} but no API key is configured (gateway.auth.keys_file or "
                         f"${cfg.auth.keys_env}); set keys, bind to 127.0.0.1, or set gateway.auth.allow_anonymous")


def champion_router(p: Params, root: Path) -> GatewayRouterConfig | None:
    """The router registered under the alias ``champion`` (the evaluate stage's choice on val), as the
    router config that builds it; ``None`` when tracking is off or the store holds no champion."""
    from jouleroute.tracking import champion, tracking_uri

    if not p.tracking.enabled:
        return None
    found = champion(tracking_uri(p.paths.resolve("mlflow_db", root)), p.tracking.experiment)
    if found is None:
        return None
    family = found["family"]
    if family != "lm" and found.get("baselines_hash") != stable_hash(
            {"baselines": p.baselines.model_dump(mode="json", by_alias=True)}):
        logger.warning("the champion %s was chosen with other `baselines` params than these; it is refitted with "
                       "these (rerun `make run` to choose again)", family)
    logger.info("serving the champion: %s (%s version %s, mean val utility %s, margin over %s: %s)",
                family if family != "lm" else f"lm/{found.get('checkpoint')}", found["name"], found["version"],
                found.get("val_utility"), found.get("runner_up"), found.get("margin"))
    query_energy = found.get("query_energy") == "1"  # the champion decides with per-query energy
    if family != "lm":
        return GatewayRouterConfig(kind=family, query_energy=query_energy)
    return GatewayRouterConfig(kind=family, path=found.get("model_dir") or None,
                               knn_weight=float(found.get("knn_weight") or 0.0),
                               knn_energy=found.get("knn_energy") or "first", query_energy=query_energy)


def target_lam(p: Params, root: Path, rc: GatewayRouterConfig, serving_champion: bool) -> GatewayRouterConfig:
    """``rc`` at the λ that meets ``router.target`` on the champion's val sweep (the evaluate stage's
    report.json, ``target.val_sweep``; routing/target.py); ``rc`` unchanged without a target."""
    if p.router.target is None:
        return rc
    import json

    from jouleroute.routing.target import resolve_lambda

    if not serving_champion:
        raise ValueError("router.target is resolved on the champion's val sweep, but gateway.router names another "
                         "router: drop gateway.router to serve the champion, or give gateway.router.lam")
    report = p.paths.resolve("evaluate_dir", root) / "report.json"
    sweep = (json.loads(report.read_text()).get("target") or {}).get("val_sweep") if report.is_file() else None
    if not sweep:
        raise FileNotFoundError(f"router.target needs the champion's val sweep in {report}; run the evaluate stage")
    lam = resolve_lambda(p.router.target, sweep)  # raises TargetNotMet (a ValueError) with the closest λ
    logger.info("router.target %s %g: serving at λ=%g, chosen on val", p.router.target.kind, p.router.target.value,
                lam)
    return rc.model_copy(update={"lam": lam})


def build_router(p: Params, cfg: GatewayConfig, root: Path, meter: Meter) -> GatewayRouter:
    rc = cfg.router
    champion = "router" not in cfg.model_fields_set  # no router configured: the champion, when there is one
    if champion:
        rc = champion_router(p, root) or rc
    rc = target_lam(p, root, rc, champion)
    low, high = min(p.router_data.lambdas), max(p.router_data.lambdas)
    if rc.kind == "lm":
        from jouleroute.routing.lm.router import LMRouter

        path = Path(rc.path) if rc.path else p.paths.resolve("grpo_dir", root) / "model"
        path = path if path.is_absolute() else root / path
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"gateway.router: no trained LM router at {path}; run `make run` (or `dvc repro "
                                    "grpo`) first, or set gateway.router.path / gateway.router.kind")
        lm = LMRouter(path, meter=meter, cfg=p.router.model_copy(update={"precision": rc.precision}))
        if rc.query_energy:
            lm = with_query_energy(p, root, lm)
        if rc.knn_weight == 0 and rc.knn_energy == "first":
            return lm_gateway_router(lm, rc.lam)
        from jouleroute.routing.blend import BlendRouter

        blend = BlendRouter(lm, fitted_baseline(p, "knn", root, meter), rc.knn_weight, rc.knn_energy,
                            name=f"lm:{path.parent.name}+knn")
        logger.info("the LM router blends kNN's evidence: weight %g, energy from %s", rc.knn_weight, rc.knn_energy)
        return ScoringGatewayRouter(blend, lm.spec.lambda_range, rc.lam, batch_size=p.router.batch_size)
    if rc.kind == "always":
        from jouleroute.routing.baselines.simple import AlwaysRouter

        return ScoringGatewayRouter(AlwaysRouter(rc.candidate, p.candidate_ids), (low, high), low)
    baseline = fitted_baseline(p, rc.kind, root, meter)
    return ScoringGatewayRouter(with_query_energy(p, root, baseline) if rc.query_energy else baseline, (low, high),
                                rc.lam)


def with_query_energy(p: Params, root: Path, router):
    """``router`` deciding with per-query energy ê_c(x), fitted at start-up on the profile as evaluate fits it."""
    import pandas as pd

    from jouleroute.routing.baselines.embeddings import build_embedder
    from jouleroute.routing.baselines.query_energy import PerQueryEnergy, QueryEnergyModel

    profile = pd.read_parquet(p.paths.resolve("profile", root))
    queries = pd.read_parquet(p.paths.resolve("queries", root))
    embedding = p.baselines.embedding.model_copy(update={"cache_dir": None})
    model = QueryEnergyModel(router.candidates, build_embedder(embedding), seed=p.baselines.seed,
                             strip_scaffold=p.baselines.strip_scaffold)
    model.fit(profile, queries, energy_column=p.energy_policy.column, split=p.baselines.train_split)
    logger.info("the router decides with per-query energy (fitted on %s)", p.baselines.train_split)
    return PerQueryEnergy(router, model, p.energy_policy.norm)


def fitted_baseline(p: Params, kind: str, root: Path, meter: Meter):
    """A learned baseline fitted at start-up on the profile, as the evaluate stage fits it."""
    import pandas as pd

    from jouleroute.routing.registry import build_router as build_baseline

    profile = pd.read_parquet(p.paths.resolve("profile", root))
    queries = pd.read_parquet(p.paths.resolve("queries", root))
    candidates = [c for c in p.candidate_ids if c in set(profile["candidate_id"])] or sorted(
        profile["candidate_id"].unique())
    baselines = p.baselines.model_copy(update={"embedding": p.baselines.embedding.model_copy(
        update={"cache_dir": None})})  # routed queries are new every time: a cache only grows
    return build_baseline(kind, profile, queries, candidates, baselines, meter=meter, energy=p.energy_policy)


def default_upstream(p: Params, cand) -> UpstreamConfig:
    """A pool entry with no gateway.upstreams entry: its own server when the pool is served, else in-process."""
    spec = p.models[cand.model]
    if p.backend.kind == "openai" and spec.source == "served":
        return UpstreamConfig(kind="openai", base_url=cand.base_url or p.backend.base_url,
                              served_name=spec.served_name, api_key_env=cand.api_key_env or p.backend.api_key_env)
    return UpstreamConfig(kind="inprocess")


def build_upstreams(p: Params, cfg: GatewayConfig, root: Path, meter: Meter, lock: threading.Lock,
                    expected: ExpectedEnergy) -> dict[str, Upstream]:
    configured = cfg.upstreams or {c.candidate_id: default_upstream(p, c) for c in p.pool}
    if not configured:
        raise ValueError("nothing to serve: the params have no pool and gateway.upstreams is empty")
    pool = {c.candidate_id: c for c in p.pool}
    backends: dict[str, object] = {}  # one loaded model per pool model, shared by its candidates
    upstreams: dict[str, Upstream] = {}
    measured = MeasuredEnergy(p.energy.prefill_weight, min((u.energy_scrape_s for u in configured.values()),
                                                           default=1.0))
    for cid, up in configured.items():
        if up.kind == "openai":
            energy = up.energy or (pool[cid].energy if cid in pool else None)  # the tournament's exporter
            upstreams[cid] = RemoteUpstream(cid, up.base_url, up.served_name or cid, expected, up.timeout_s,
                                            up.connect_timeout_s, up.concurrency, up.api_key_env, measured,
                                            measured.tracker(energy))
            continue
        if cid not in pool:
            raise ValueError(f"gateway.upstreams.{cid}: an inprocess upstream must be a pool candidate "
                             f"({sorted(pool)})")
        cand = pool[cid]
        if cand.model not in backends:
            from jouleroute.backends.factory import make_backend

            backend_cfg = p.backend if p.backend.kind != "openai" else p.backend.model_copy(
                update={"kind": "transformers"})
            logger.info("loading %s for %s", cand.model, cid)
            backends[cand.model] = make_backend(backend_cfg, cand.model, p.models[cand.model],
                                                p.paths.resolve("models_dir", root))
        upstreams[cid] = InProcessUpstream(cand, backends[cand.model], meter, lock)
    return upstreams


def build_gateway(p: Params, root: Path, cfg: GatewayConfig | None = None) -> Gateway:
    cfg = cfg or p.gateway
    keys = KeyStore.load(cfg.auth, root)
    check_exposure(cfg, keys)
    meter = make_meter(p.energy)
    lock = threading.Lock()
    expected = ExpectedEnergy.from_profile(p.paths.resolve("profile", root), p.energy.prefill_weight)
    router = build_router(p, cfg, root, meter)
    stale = sorted(set(router.candidates) - set(p.candidate_ids))
    if not cfg.upstreams and stale:  # the embedded default serves the params' pool
        raise ValueError(f"the router ({router.name}) was trained for candidates {stale} that the params' pool "
                         f"({p.candidate_ids}) lacks; rerun `make run` so router and pool match, or map them "
                         "in gateway.upstreams")
    upstreams = build_upstreams(p, cfg, root, meter, lock, expected)
    gateway = Gateway(cfg, router, upstreams, keys, lock)
    attach_measured(gateway)
    return gateway


def attach_measured(gateway: Gateway) -> None:
    """Export the upstreams' measured joules in the gateway's /metrics (one collector for all of them)."""
    measured = {id(u.measured): u.measured for u in gateway.upstreams.values()
                if isinstance(u, RemoteUpstream) and u.measured is not None and u.measured.trackers}
    for collector in measured.values():
        gateway.metrics.registry.register(collector)
