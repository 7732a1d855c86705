"""Build a gateway from params: the router, the upstreams and the keys its config names.

With an empty ``gateway`` section this is the embedded default of ``jouleroute serve``: the
pool's candidates generated in-process (one loaded model per pool model) behind the champion, the
router the evaluate stage chose on val and saved as fitted, with its λ, in this workspace's
``evaluate_dir/champion`` (routing/champion.py: any family, loaded, never refitted; checked against the
MLflow registry's alias ``champion`` when the store has one). Without a champion it is the trained LM
router of ``paths.grpo_dir/model`` at ``router.lam``. Energy is metered with the ``energy`` section's
meter. A ``gateway.router`` in the config always wins.
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
from jouleroute.policy.choose import CASCADE, ROUTE, SINGLE
from jouleroute.policy.kinds import deployed_policy, describe
from jouleroute.pool import CandidateSpec, ModelSpec
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
    profile_source: str  # tournament: the pool's order of candidates; otherwise the profile's, sorted
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


def champion_dir(p: Params, root: Path) -> Path:
    return p.paths.resolve("evaluate_dir", root) / "champion"


def check_registry(p: Params, root: Path, record: dict) -> None:
    """Warn when the registry's alias ``champion`` names another evaluate run than this workspace's champion
    (after ``exp apply`` or ``git checkout`` + ``dvc checkout`` the workspace's is the one served)."""
    from jouleroute.tracking import champion, tracking_uri

    if not p.tracking.enabled:
        return
    found = champion(tracking_uri(p.paths.resolve("mlflow_db", root)), p.tracking.experiment)
    if found is None or not record.get("evaluate_run_id"):
        return
    if found.get("evaluate_run_id") != record["evaluate_run_id"]:
        logger.warning("the registry's champion (%s version %s, evaluate run %s) is not this workspace's (evaluate "
                       "run %s): serving the workspace's, the evaluate output checked out here", found["name"],
                       found["version"], found.get("evaluate_run_id"), record["evaluate_run_id"])
    else:
        logger.info("the workspace's champion is the registry's %s version %s", found["name"], found["version"])


def champion_router(p: Params, root: Path, meter: Meter, target_asked: bool | None = None) -> GatewayRouter | None:
    """The champion saved by the evaluate stage in this workspace, loaded as fitted and served at its deployed λ
    (chosen on selection data for the default target, evaluation/deployed.py), or at the λ that meets an explicit
    ``router.target`` on its selection sweep; every query to one model when the deployment chose that model
    because routing did not pay on selection data; ``None`` when the workspace has none. ``target_asked``: a target
    other than the one evaluate deployed for (default: whenever params carry one)."""
    from jouleroute.routing.champion import read_champion

    target_asked = p.router.target is not None if target_asked is None else target_asked
    folder = champion_dir(p, root)
    record = read_champion(folder)
    if record is None:
        return None
    check_registry(p, root, record)
    lam, family = float(record["lam"]), record["family"]
    if record.get("policy") == "single" and not target_asked:
        from jouleroute.routing.baselines.simple import AlwaysRouter

        logger.info("serving the deployed point: every query to %s (routing with the champion %s did not pay on "
                    "selection data; %s)", record["single"], record["name"], folder)
        candidates = p.candidate_ids or [record["single"]]  # params may leave the pool to the profile
        return ScoringGatewayRouter(AlwaysRouter(record["single"], candidates), tuple(record["lambda_range"]), lam)
    if target_asked:
        lam = target_lam(p, record.get("val_sweep"), folder)
    elif record.get("lam_chosen_by"):  # the deployed point: the λ evaluate chose on selection data
        logger.info("serving the deployed point: λ=%g, chosen on selection data for router.target %s", lam,
                    record["lam_chosen_by"])
    elif lam != p.router.lam:
        logger.warning("the champion was evaluated at λ=%g and is served there; params say router.lam=%g (rerun "
                       "`dvc repro evaluate` to deploy that)", lam, p.router.lam)
    with_energy = record.get("query_energy") or []  # the parts that decide with per-query energy
    logger.info("serving the champion: %s at λ=%g (mean val utility %s%s; %s)", record["name"], lam,
                record.get("val_utility"), ", per-query energy" if with_energy else "", folder)

    def energy_of(part: str):
        return (lambda: _saved(folder, "query_energy", record, None)) if part in with_energy else None

    if family == "lm":
        evidence = record.get("knn_evidence") or {}
        rc = GatewayRouterConfig(path=record["model_dir"], knn_weight=float(evidence.get("weight", 0.0)),
                                 knn_energy=evidence.get("energy", "first"))

        def knn():
            return _with_query_energy(p, _saved(folder, "knn", record, meter), energy_of("knn"))

        return lm_router(p, rc, root, meter, lam, knn, energy_of("lm"))
    router = _with_query_energy(p, _saved(folder, "router", record, meter), energy_of("router"))
    return ScoringGatewayRouter(router, tuple(record["lambda_range"]), lam)


def target_lam(p: Params, sweep: dict | None, folder: Path) -> float:
    """The λ that meets ``router.target`` on the champion's val sweep (saved with the champion by the evaluate
    stage; policy/meet.py); raises ``TargetNotMet`` (a ValueError) with the closest λ."""
    from jouleroute.policy.meet import resolve_lambda

    if not sweep:
        raise FileNotFoundError(f"router.target needs the champion's val sweep, which {folder} does not hold; rerun "
                                "`dvc repro evaluate`")
    lam = resolve_lambda(p.router.target, sweep)
    logger.info("router.target %s %g: serving at λ=%g, chosen on val", p.router.target.kind, p.router.target.value,
                lam)
    return lam


def _saved(folder: Path, key: str, record: dict, meter: Meter | None):
    from jouleroute.routing.baselines.config import EmbeddingConfig
    from jouleroute.routing.baselines.embeddings import build_embedder
    from jouleroute.routing.champion import load_fitted

    return load_fitted(folder, key, build_embedder(EmbeddingConfig.model_validate(record["embedding"])), meter)


def _with_query_energy(p: Params, router, query_energy):
    """``router`` deciding with the per-query energy model ``query_energy()`` loads (the champion's, as evaluate
    fitted it), or ``router`` itself without one."""
    if query_energy is None:
        return router
    from jouleroute.routing.baselines.query_energy import PerQueryEnergy

    return PerQueryEnergy(router, query_energy(), p.energy_policy.norm)


def lm_router(p: Params, rc: GatewayRouterConfig, root: Path, meter: Meter, lam: float, knn,
              query_energy=None) -> GatewayRouter:
    """The LM router of ``rc.path`` (default ``grpo_dir/model``), deciding with ``query_energy()``'s per-query
    energy when given and blended with ``knn()``'s evidence when ``rc`` says so."""
    from jouleroute.routing.lm.router import LMRouter

    path = Path(rc.path) if rc.path else p.paths.resolve("grpo_dir", root) / "model"
    path = path if path.is_absolute() else root / path
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"gateway.router: no trained LM router at {path}; run `make run` (or `dvc repro "
                                "grpo`) first, or set gateway.router.path / gateway.router.kind")
    lm = _with_query_energy(p, LMRouter(path, meter=meter, cfg=p.router.model_copy(update={"precision": rc.precision})),
                            query_energy)
    if rc.knn_weight == 0 and rc.knn_energy == "first":
        return lm_gateway_router(lm, lam)
    from jouleroute.routing.blend import BlendRouter

    blend = BlendRouter(lm, knn(), rc.knn_weight, rc.knn_energy, name=f"lm:{path.parent.name}+knn")
    logger.info("the LM router blends kNN's evidence: weight %g, energy from %s", rc.knn_weight, rc.knn_energy)
    return ScoringGatewayRouter(blend, lm.spec.lambda_range, lam, batch_size=p.router.batch_size)


def build_router(p: Params, cfg: GatewayConfig, root: Path, meter: Meter,
                 target_asked: bool | None = None) -> GatewayRouter:
    rc = cfg.router
    if "router" not in cfg.model_fields_set:  # no router configured: the champion, when there is one
        served = champion_router(p, root, meter, target_asked)
        if served is not None:
            return served
    if p.router.target is not None:
        raise ValueError("router.target is resolved on the champion's val sweep, but there is no champion here or "
                         "gateway.router names another router: drop gateway.router to serve the champion (run "
                         "`make run`), or drop router.target and give router.lam")
    low, high = min(p.router_data.lambdas), max(p.router_data.lambdas)
    lam = p.router.lam
    query_energy = (lambda: fitted_query_energy(p, root)) if rc.query_energy else None
    if rc.kind == "lm":
        return lm_router(p, rc, root, meter, lam, lambda: fitted_baseline(p, "knn", root, meter), query_energy)
    if rc.kind == "always":
        from jouleroute.routing.baselines.simple import AlwaysRouter

        return ScoringGatewayRouter(AlwaysRouter(rc.candidate, p.candidate_ids), (low, high), low)
    baseline = _with_query_energy(p, fitted_baseline(p, rc.kind, root, meter), query_energy)
    return ScoringGatewayRouter(baseline, (low, high), lam)


def fitted_query_energy(p: Params, root: Path):
    """Per-query energy ê_c(x) for a configured router (``gateway.router.query_energy``), fitted at start-up on
    the profile's train split as the evaluate stage fits it (the champion brings its own, fitted by evaluate)."""
    import pandas as pd

    from jouleroute.routing.baselines.embeddings import build_embedder
    from jouleroute.routing.baselines.query_energy import QueryEnergyModel
    from jouleroute.routing.registry import candidate_order

    profile = pd.read_parquet(p.paths.resolve("profile", root))
    queries = pd.read_parquet(p.paths.resolve("queries", root))
    embedding = p.baselines.embedding.model_copy(update={"cache_dir": None})
    model = QueryEnergyModel(candidate_order(profile, p.candidate_ids, p.profile_source), build_embedder(embedding),
                             seed=p.baselines.seed, strip_scaffold=p.baselines.strip_scaffold)
    model.fit(profile, queries, energy_column=p.energy_policy.column, split=p.baselines.train_split)
    logger.info("the router decides with per-query energy (fitted on %s)", p.baselines.train_split)
    return model


def fitted_baseline(p: Params, kind: str, root: Path, meter: Meter):
    """A learned baseline named in ``gateway.router`` (not the champion, which is loaded as evaluate fitted
    it): fitted at start-up on the profile, on the same train sample and candidate order as evaluate's."""
    import pandas as pd

    from jouleroute.routing.registry import build_router as build_baseline, candidate_order, sample_train

    profile = pd.read_parquet(p.paths.resolve("profile", root))
    queries = pd.read_parquet(p.paths.resolve("queries", root))
    candidates = candidate_order(profile, p.candidate_ids, p.profile_source)  # as evaluate orders them
    baselines = p.baselines.model_copy(update={"embedding": p.baselines.embedding.model_copy(
        update={"cache_dir": None})})  # routed queries are new every time: a cache only grows
    return build_baseline(kind, sample_train(profile, baselines), queries, candidates,
                          baselines, meter=meter, energy=p.energy_policy, lam=p.router.lam)


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
        gateway.drift = drift_monitor(p, cfg, root, gateway.metrics.registry)
    if reuse is not None and reuse.capture is not None:  # the same capture goes on, its gauges on the new /metrics
        gateway.capture = reuse.capture
        reuse.capture.register_gauges(gateway.metrics.registry)
    elif cfg.capture.folder:  # what is served, kept for the next tournament (gateway/capture.py)
        from jouleroute.gateway.capture import Capture

        folder = Path(cfg.capture.folder)
        gateway.capture = Capture(cfg.capture, folder if folder.is_absolute() else root / folder,
                                  gateway.metrics.registry)
    return gateway


def drift_monitor(p: Params, cfg: GatewayConfig, root: Path, registry):
    """The drift monitor over the training queries' prompts, embedded as the routers embed them (gateway/drift.py)."""
    import pandas as pd

    from jouleroute.gateway.drift import DriftMonitor
    from jouleroute.routing.baselines.embeddings import build_embedder

    queries = pd.read_parquet(p.paths.resolve("queries", root))
    train = queries[queries["split"] == "train"]
    embedding = p.baselines.embedding
    if embedding.cache_dir is not None and not Path(embedding.cache_dir).is_absolute():
        embedding = embedding.model_copy(update={"cache_dir": str(root / embedding.cache_dir)})
    return DriftMonitor(build_embedder(embedding), list(train["question"]), list(train["task"]), cfg.drift, registry)


def policy_version(p: Params, cfg: GatewayConfig, root: Path, record: dict | None) -> str:
    """The served policy's version: the deployed record's content hash (champion.json names its evaluate run), or
    the router ``gateway.router`` names."""
    import hashlib

    if record is None:
        return f"gateway.router:{cfg.router.kind}"
    raw = (champion_dir(p, root) / "champion.json").read_bytes()
    return f"{record['deployed']['kind']}:{hashlib.sha256(raw).hexdigest()[:12]}"


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

    chain_file = None if record is None else champion_dir(parts.p, parts.root) / "chain.json"
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
