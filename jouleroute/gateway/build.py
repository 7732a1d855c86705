"""Build a gateway from params: the deployed policy (or the router its config names: gateway/router_build.py), the
upstreams and the keys.

With an empty ``gateway`` section this is the embedded default of ``jouleroute serve``: the pool's candidates
generated in-process (one loaded model per pool model) behind the policy the evaluate stage deployed, whatever its
kind, saved in this workspace's ``evaluate_dir/champion`` (champion.json's ``deployed``; a route's router loaded as
fitted, never refitted; a cascade's chain file; checked against the MLflow registry's alias ``champion`` when the
store has one), each kind built through its entry of ``SERVE``. Without a champion it is the trained LM router of
``paths.grpo_dir/model`` at ``router.lam``. Energy is metered with the ``energy`` section's meter. A
``gateway.router`` in the config always wins.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from jouleroute.energy import make_meter
from jouleroute.energy.base import Meter
from jouleroute.gateway.auth import KeyStore
from jouleroute.gateway.config import LOOPBACK_HOSTS, GatewayConfig, UpstreamConfig
from jouleroute.gateway.energy import ExpectedEnergy
from jouleroute.gateway.service import Gateway
from jouleroute.gateway.measured import MeasuredEnergy
from jouleroute.gateway.remote import RemoteUpstream
from jouleroute.gateway.router_build import Params, build_router, champion_dir, check_registry
from jouleroute.gateway.upstreams import InProcessUpstream, Upstream
from jouleroute.gateway.version import record_version
from jouleroute.policy.choose import CASCADE, ROUTE, SINGLE
from jouleroute.policy.kinds import DEPLOYED_CHAIN, deployed_policy, describe

logger = logging.getLogger(__name__)


def check_exposure(cfg: GatewayConfig, keys: KeyStore) -> None:
    """Refuse to serve an open gateway beyond loopback unless the config says it is meant."""
    if not keys.required and cfg.host not in LOOPBACK_HOSTS and not cfg.auth.allow_anonymous:
        raise ValueError(f"gateway.host is {cfg.host!r} but no API key is configured (gateway.auth.keys_file or "
                         f"${cfg.auth.keys_env}); set keys, bind to 127.0.0.1, or set gateway.auth.allow_anonymous")


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
                                            measured.tracker(energy, cid))
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


def build_gateway(p: Params, root: Path, cfg: GatewayConfig | None = None, reuse: Gateway | None = None,
                  target_asked: bool = False) -> Gateway:
    """The gateway ``jouleroute serve`` runs: the upstreams, keys and energy, and what answers ``jouleroute-auto``.
    With no ``gateway.router`` and no ``router.target``: the policy the evaluate stage deployed, whatever its kind,
    through its entry of ``SERVE`` (a route or a single model: the champion router; a cascade: its chain file).
    Otherwise the router ``gateway.router`` names (``kind: cascade``: a chain file). ``reuse``: a running gateway
    whose upstreams, keys, lock and capture the new one takes over (a hot reload, gateway/reload.py);
    ``target_asked``: `serve --target-*` asked for another target than evaluate deployed for (the router champion is
    then served at the λ meeting it on its saved sweep)."""
    cfg = cfg or p.gateway
    keys = reuse.keys if reuse is not None else KeyStore.load(cfg.auth, root)
    check_exposure(cfg, keys)
    parts = _Parts(p, cfg, root, keys, make_meter(p.energy), reuse.lock if reuse is not None else threading.Lock(),
                   ExpectedEnergy.from_profile(p.paths.resolve("profile", root), p.energy.prefill_weight),
                   reuse.upstreams if reuse is not None else None)
    parts.target_asked = target_asked or None  # None: as params say (a target there re-resolves an old champion)
    record = deployed_record(p, cfg, root, target_asked)
    if record is not None:
        kind = deployed_policy(record, str(champion_dir(p, root) / "champion.json"))["kind"]
        logger.info("serving the deployed policy: %s", describe(record["deployed"]))
        gateway = SERVE[kind](parts, record)
    elif cfg.router.kind == "cascade":
        gateway = _serve_cascade(parts, None)
    else:
        gateway = _serve_router(parts, None)
    attach_measured(gateway)
    gateway.version = policy_version(p, cfg, root, record)
    if cfg.drift.enabled:  # built anew with the policy: a promotion may bring other training queries
        gateway.drift = drift_monitor(p, cfg, root, gateway.metrics.registry, gateway.lock)
    if reuse is not None and reuse.capture is not None:  # the same capture goes on, its gauges on the new /metrics
        gateway.capture = reuse.capture
        reuse.capture.register_gauges(gateway.metrics.registry)
    elif cfg.capture.folder:  # what is served, kept for the next tournament (gateway/capture.py)
        from jouleroute.gateway.capture import Capture

        folder = Path(cfg.capture.folder)
        gateway.capture = Capture(cfg.capture, folder if folder.is_absolute() else root / folder,
                                  gateway.metrics.registry)
    return gateway


def drift_monitor(p: Params, cfg: GatewayConfig, root: Path, registry, compute_lock=None):
    """The drift monitor over the training queries' prompts, embedded as the routers embed them (gateway/drift.py)."""
    import pandas as pd

    from jouleroute.gateway.drift import DriftMonitor
    from jouleroute.routing.baselines.embeddings import build_embedder

    queries = pd.read_parquet(p.paths.resolve("queries", root))
    train = queries[queries["split"] == "train"]
    embedding = p.baselines.embedding
    if embedding.cache_dir is not None and not Path(embedding.cache_dir).is_absolute():
        embedding = embedding.model_copy(update={"cache_dir": str(root / embedding.cache_dir)})
    return DriftMonitor(build_embedder(embedding), list(train["question"]), list(train["task"]), cfg.drift, registry,
                        compute_lock)


def policy_version(p: Params, cfg: GatewayConfig, root: Path, record: dict | None) -> str:
    """The served policy's version (``record_version`` of its champion.json), or the router ``gateway.router``
    names."""
    if record is None:
        return f"gateway.router:{cfg.router.kind}"
    return record_version((champion_dir(p, root) / "champion.json").read_bytes())


class _Parts:
    """What every kind's gateway is built from: the params, config, keys, meter, lock and expected energy."""

    def __init__(self, p, cfg, root, keys, meter, lock, expected, running: dict | None = None) -> None:
        self.p, self.cfg, self.root, self.keys, self.meter, self.lock, self.expected = (p, cfg, root, keys, meter,
                                                                                        lock, expected)
        self.running = running  # a reload's: the upstreams already serving

    def upstreams(self) -> dict:
        if self.running is not None:
            return self.running
        return build_upstreams(self.p, self.cfg, self.root, self.meter, self.lock, self.expected)


def _serve_router(parts: _Parts, record: dict | None) -> Gateway:
    """A route or a single model (the champion router; every query to one model when that was deployed), or the
    router ``gateway.router`` names."""
    p, cfg = parts.p, parts.cfg
    router = build_router(p, cfg, parts.root, parts.meter, parts.target_asked if record is None else False)
    stale = sorted(set(router.candidates) - set(p.candidate_ids))
    if not cfg.upstreams and stale:  # the embedded default serves the params' pool
        raise ValueError(f"the router ({router.name}) was trained for candidates {stale} that the params' pool "
                         f"({p.candidate_ids}) lacks; rerun `make run` so router and pool match, or map them "
                         "in gateway.upstreams")
    return Gateway(cfg, router, parts.upstreams(), parts.keys, parts.lock)


def _serve_cascade(parts: _Parts, record: dict | None) -> Gateway:
    """A deployed cascade (its chain file beside champion.json) or the chain file ``gateway.router.chain`` names."""
    from jouleroute.gateway.cascade import cascade_gateway

    chain_file = None if record is None else champion_dir(parts.p, parts.root) / DEPLOYED_CHAIN
    return cascade_gateway(parts.cfg, parts.root, parts.upstreams(), parts.keys, parts.lock, chain_file)


SERVE = {ROUTE: _serve_router, SINGLE: _serve_router, CASCADE: _serve_cascade}  # one entry per policy kind


def deployed_record(p: Params, cfg: GatewayConfig, root: Path, target_asked: bool = False) -> dict | None:
    """The champion record whose deployed policy `serve` runs when nothing else is asked for (no gateway.router, no
    target on the command line): `serve` with no options serves what the report deployed, for the params' own
    router.target too (evaluate deployed for it). None otherwise."""
    from jouleroute.routing.champion import read_champion

    if "router" in cfg.model_fields_set or target_asked:
        return None
    record = read_champion(champion_dir(p, root))
    if not record or not record.get("deployed"):  # none, or an older champion: served as a router
        return None
    check_registry(p, root, record)
    return record


def attach_measured(gateway: Gateway) -> None:
    """Export the upstreams' measured joules in the gateway's /metrics (one collector for all of them)."""
    measured = {id(u.measured): u.measured for u in gateway.upstreams.values()
                if isinstance(u, RemoteUpstream) and u.measured is not None and u.measured.trackers}
    for collector in measured.values():
        gateway.metrics.registry.register(collector)
