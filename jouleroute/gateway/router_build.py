"""The router a gateway serves: the champion saved by the evaluate stage (loaded as fitted, at its deployed λ or
the λ meeting a ``--target-*`` on its saved sweep; every query to one model when a single was deployed), or the
router ``gateway.router`` names (the LM router checkpoint, a baseline fitted at start-up, one fixed candidate).
gateway/build.py assembles the rest of the gateway around it. ``Params`` names what building a gateway reads."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol, Sequence

from jouleroute.backends import BackendConfig
from jouleroute.energy import EnergyConfig
from jouleroute.energy.base import Meter
from jouleroute.energy.config import EnergyPolicy
from jouleroute.gateway.config import GatewayConfig, GatewayRouterConfig
from jouleroute.gateway.routers import GatewayRouter, ScoringGatewayRouter, lm_gateway_router
from jouleroute.paths import PathsConfig
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

    profile = pd.read_parquet(p.paths.resolve("labelled_profile", root))  # as evaluate fitted it
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

    profile = pd.read_parquet(p.paths.resolve("labelled_profile", root))  # as evaluate fitted it
    queries = pd.read_parquet(p.paths.resolve("queries", root))
    candidates = candidate_order(profile, p.candidate_ids, p.profile_source)  # as evaluate orders them
    baselines = p.baselines.model_copy(update={"embedding": p.baselines.embedding.model_copy(
        update={"cache_dir": None})})  # routed queries are new every time: a cache only grows
    return build_baseline(kind, sample_train(profile, baselines), queries, candidates,
                          baselines, meter=meter, energy=p.energy_policy, lam=p.router.lam)
