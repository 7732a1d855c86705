"""MLflow, decided in one place: the store, the experiment, where artifacts go, stage runs, the registry.

* The store is a sqlite file (``paths.mlflow_db``); artifacts live beside it, in
  ``<store>/artifacts/<experiment>``, never in the working directory.
* MLflow records artifact locations as absolute ``file://`` URIs. A copied or moved clone
  would keep writing into the original's folder, so every time an experiment is opened
  the store is *relocated*: recorded locations under the store's old folder are rewritten
  to its current one. Anything still outside the store after that is refused
  (:class:`TrackingStoreError`) rather than written into another clone.
* Every stage opens one run (:func:`stage_run`) tagged ``run_kind=stage`` (the README's
  filter); evaluation children are ``run_kind=family`` / ``router``.
* :func:`register_router` adds a Model Registry version per trained router: a small
  pointer (path, weight hashes, λ range), not a copy of the weights.
* :func:`register_champion` registers the router chosen on val (any family) and points the alias
  ``champion`` at it; :func:`champion` reads it back (``jouleroute serve`` serves it by default).
"""

from __future__ import annotations

import logging
import math
import os
import re
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

logger = logging.getLogger(__name__)

RUN_KIND = "run_kind"  # tag: stage | family | router (README: filter_string="tags.run_kind = 'stage'")
STORE_ROOT_TAG = "jouleroute.store_root"  # experiment tag: the store folder the locations were written for
ROUTER_MODEL = "jouleroute-router"  # registered model name (suffixed by the experiment for other experiments)
_BATCH = 1000  # MLflow's per-request metric limit
# MLflow 3's UI opens an experiment on its GenAI (traces) pages unless the experiment says it trains models
EXPERIMENT_KIND, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"
LAMBDA_STEP = 1000  # metrics swept over λ are logged at step = round(λ x LAMBDA_STEP): charted against λ
# tables/columns of MLflow's sqlite schema that hold artifact URIs (those present are rewritten)
_URI_COLUMNS = {"experiments": ("artifact_location",), "runs": ("artifact_uri",),
                "model_versions": ("storage_location", "source"), "logged_models": ("artifact_location",)}


class TrackingStoreError(RuntimeError):
    """The MLflow store would write outside its own folder (or cannot be opened)."""


def tracking_uri(db_path: Path) -> str:
    return f"sqlite:///{Path(db_path).resolve()}"


def _store_dir(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")).parent if uri.startswith("sqlite:///") else None


def ensure_store(uri: str) -> str:
    """Create the folder of a ``sqlite:///`` store so MLflow can open it; return the URI."""
    store = _store_dir(uri)
    if store is not None:
        store.mkdir(parents=True, exist_ok=True)
    return uri


def artifact_location(uri: str, experiment: str) -> str | None:
    """``<store>/artifacts/<experiment>`` for a sqlite store; MLflow's default otherwise."""
    store = _store_dir(uri)
    return (store / "artifacts" / experiment).resolve().as_uri() if store is not None else None


def _location_root(location: str) -> str | None:
    """The store folder a location was written for: the part before ``/artifacts/``."""
    head, sep, _ = (location.rstrip("/") + "/").rpartition("/artifacts/")  # also an older "<store>/artifacts"
    return head if sep else None


def relocate_store(db_path: Path, old_root: str, new_root: str) -> int:
    """Rewrite every artifact URI under ``old_root`` to ``new_root`` in the sqlite store; return rows changed."""
    old, new = old_root.rstrip("/") + "/", new_root.rstrip("/") + "/"
    changed = 0
    with sqlite3.connect(db_path) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        for table, columns in _URI_COLUMNS.items():
            if table not in tables:
                continue
            for col in columns:
                cur = con.execute(f"UPDATE {table} SET {col} = ? || substr({col}, ?) WHERE substr({col}, 1, ?) = ?",
                                  (new, len(old) + 1, len(old), old))
                changed += cur.rowcount
    return changed


def experiment_id(client: Any, uri: str, name: str) -> str:
    """Get or create ``name`` with artifacts inside the store; relocate a copied store; refuse writing outside."""
    ensure_store(uri)
    wanted = artifact_location(uri, name)
    store = _store_dir(uri)
    found = client.get_experiment_by_name(name)
    if found is None:
        tags = {STORE_ROOT_TAG: store.resolve().as_uri()} if store is not None else {}
        return client.create_experiment(name, artifact_location=wanted, tags=tags | {EXPERIMENT_KIND: MODEL_TRAINING})
    if EXPERIMENT_KIND not in found.tags:  # a store made before: the UI opens it on the runs table too
        client.set_experiment_tag(found.experiment_id, EXPERIMENT_KIND, MODEL_TRAINING)
    if store is None:
        return found.experiment_id
    here = store.resolve().as_uri()
    location = found.artifact_location
    if not location.startswith(here + "/"):
        old_root = found.tags.get(STORE_ROOT_TAG) or _location_root(location)
        if old_root and old_root != here:
            rows = relocate_store(Path(uri.removeprefix("sqlite:///")), old_root, here)
            logger.warning("MLflow store moved from %s to %s: rewrote %d artifact location(s)", old_root, here, rows)
            client.set_experiment_tag(found.experiment_id, STORE_ROOT_TAG, here)
            location = client.get_experiment(found.experiment_id).artifact_location
    if not location.startswith(here + "/"):
        raise TrackingStoreError(f"MLflow experiment '{name}' stores artifacts at {location}, outside this store "
                                 f"({here}); refusing to write there. Delete {store} or set paths.mlflow_db to a "
                                 "fresh file")
    return found.experiment_id


def energy_label(sources: list[str]) -> str:
    """One ``energy_source`` tag for a set of sources: the source, ``mixed:a+b``, or ``none``."""
    sources = sorted(set(sources))
    return "none" if not sources else sources[0] if len(sources) == 1 else "mixed:" + "+".join(sources)


def lambda_step(lam: float) -> int:
    return round(float(lam) * LAMBDA_STEP)


_KEY_REFUSED = re.compile(r"[^A-Za-z0-9_\-. :/]")


def mlflow_key(key: str) -> str:
    """``key`` as MLflow accepts a param or metric name: each character it refuses (``@``, ``+``, ``(`` ... in a
    public pool's model names, ``Llama-3.1-405B-Inst@sambanova``) becomes ``_``."""
    return _KEY_REFUSED.sub("_", str(key))


def mlflow_keys(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` under names MLflow accepts (``mlflow_key``); where two names become one, the first is kept.
    Run params, metrics and tags and the registry's version tags all go through it (a contender is named
    ``lm/sft+query-energy``; a public pool's model ``Llama-3.1-405B-Inst@sambanova``)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        out.setdefault(mlflow_key(key), value)
    return out


def finite_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """Numeric, finite values only (MLflow rejects None; NaN would chart as a gap anyway); bools as 0/1."""
    out = {}
    for key, value in metrics.items():
        if isinstance(value, bool):
            value = float(value)
        if isinstance(value, (int, float)) and math.isfinite(float(value)):
            out[key] = float(value)
    return out


class StageRun:
    """One MLflow run, written through an explicit client (no process-wide MLflow state)."""

    def __init__(self, client: Any, run_id: str, uri: str | None = None):
        self.client, self.run_id, self.uri = client, run_id, uri

    @contextmanager
    def active(self) -> Iterator[Any]:
        """This run as MLflow's active run, for the APIs that only write there (``mlflow.pyfunc.log_model``).
        Leaving marks it finished; the stage that opened it sets its final status when the stage ends."""
        import mlflow

        mlflow.set_tracking_uri(self.uri)
        with mlflow.start_run(run_id=self.run_id):
            yield mlflow

    def log_metrics(self, metrics: dict[str, Any], step: int = 0) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, v, now, step) for k, v in mlflow_keys(finite_metrics(metrics)).items()]
        for i in range(0, len(items), _BATCH):
            self.client.log_batch(self.run_id, metrics=items[i:i + _BATCH])

    def _log_params(self, params: dict[str, Any]) -> None:
        """Only ``stage_run`` logs params, when the run opens: a stage's params are its dvc.yaml params."""
        from mlflow.entities import Param

        existing = self.client.get_run(self.run_id).data.params
        items = [Param(k, str(v)[:6000]) for k, v in mlflow_keys(params).items() if k not in existing]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i:i + 100])

    def set_tags(self, tags: dict[str, Any]) -> None:
        for key, value in mlflow_keys(tags).items():
            self.client.set_tag(self.run_id, key, str(value))

    def log_artifact(self, path: Path, folder: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path=folder)

    def log_dict(self, obj: Any, name: str) -> None:
        self.client.log_dict(self.run_id, obj, name)

    def log_text(self, text: str, name: str) -> None:
        self.client.log_text(self.run_id, text, name)


def run_tags(stage: str, base: dict[str, str], energy_source: str | None) -> dict[str, str]:
    return {**base, "stage": stage, RUN_KIND: "stage", "energy_source": energy_source or "none"}


@contextmanager
def stage_run(uri: str | None, experiment: str, stage: str, tags: dict[str, str], params: dict[str, Any],
              energy_source: str | None = None, start_time_ms: int | None = None) -> Iterator[StageRun | None]:
    """One run named ``stage`` with the standard tags and ``params``; yields ``None`` when tracking is off.
    The run ends FAILED when the body raises, so a failed stage is visible next to the good ones.
    ``start_time_ms``: when the stage began (its results are logged at the end), so that the run's
    duration in the MLflow UI is the stage's wall time."""
    if not uri:
        yield None
        return
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = experiment_id(client, uri, experiment)
    run = StageRun(client, client.create_run(exp, run_name=stage, start_time=start_time_ms,
                                             tags=mlflow_keys(run_tags(stage, tags, energy_source))).info.run_id, uri)
    try:
        run._log_params(params)
        yield run
    except BaseException:
        client.set_terminated(run.run_id, "FAILED")
        raise
    client.set_terminated(run.run_id, "FINISHED")


def register_router(uri: str | None, experiment: str, run_id: str, model_dir: Path, tags: dict[str, Any]) -> str | None:
    """Register a new version of the router: a pointer artifact (folder, weight sha256, λ range), tagged.

    Returns the version number. The weights stay where DVC keeps them; ``sft.log_model`` /
    ``grpo.log_model`` log a full pyfunc copy when asked.
    """
    if not uri:
        return None
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from jouleroute.provenance import file_sha256

    client = MlflowClient(tracking_uri=uri)
    name = registered_name(experiment)
    pointer = {"model_dir": str(model_dir),
               "weights_sha256": {p.name: file_sha256(p) for p in sorted(Path(model_dir).glob("*.safetensors"))},
               **{k: v for k, v in tags.items()}}
    client.log_dict(run_id, pointer, "router/pointer.json")
    try:
        client.create_registered_model(name, description="jouleroute LM router: one version per trained router "
                                                         "(a pointer to its folder; weights are DVC outputs)")
    except MlflowException:
        pass  # already registered
    source = f"{client.get_run(run_id).info.artifact_uri}/router"
    version = client.create_model_version(name, source=source, run_id=run_id,
                                          tags={k: str(v) for k, v in mlflow_keys(tags).items()})
    return str(version.version)


def registered_name(experiment: str) -> str:
    return ROUTER_MODEL if experiment == "jouleroute" else f"{ROUTER_MODEL}-{experiment}"


CHAMPION_MODEL = "jouleroute-champion"  # registered model of the routers chosen on val, any family
CHAMPION_ALIAS = "champion"


def champion_name(experiment: str) -> str:
    return CHAMPION_MODEL if experiment == "jouleroute" else f"{CHAMPION_MODEL}-{experiment}"


def register_champion(uri: str | None, experiment: str, run_id: str, pointer: dict[str, Any],
                      tags: dict[str, Any], artifact_dir: Path | None = None) -> str | None:
    """A new version of the champion model, pointing at the chosen router, and the alias ``champion`` on it.

    ``pointer`` says what it is (``family``, ``checkpoint``, the deployed ``lam``; an LM router's ``model_dir``
    relative to the repository) and is logged as ``champion/pointer.json`` in ``run_id``, beside the champion
    artifact ``artifact_dir`` (the evaluate stage's ``evaluate_dir/champion``: the router as fitted);
    ``tags`` (the val figures) go on the version. Returns the version number.
    """
    if not uri:
        return None
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=uri)
    name = champion_name(experiment)
    client.log_dict(run_id, pointer, "champion/pointer.json")
    if artifact_dir is not None:
        client.log_artifacts(run_id, str(artifact_dir), "champion")
    try:
        client.create_registered_model(name, description="the router chosen on val (best mean val utility over "
                                                         "the trained λ grid, any family); alias 'champion'")
    except MlflowException:
        pass  # already registered
    version = client.create_model_version(name, source=f"{client.get_run(run_id).info.artifact_uri}/champion",
                                          run_id=run_id,
                                          tags={k: str(v) for k, v in mlflow_keys({**pointer, **tags}).items()})
    client.set_registered_model_alias(name, CHAMPION_ALIAS, version.version)
    return str(version.version)


def champion(uri: str | None, experiment: str) -> dict[str, str] | None:
    """The tags of the version aliased ``champion`` (its pointer and val figures, plus ``version``), or
    ``None`` when the store has none (tracking off, no store, or no selection made yet)."""
    if not uri or (uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists()):
        return None
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        found = MlflowClient(tracking_uri=uri).get_model_version_by_alias(champion_name(experiment), CHAMPION_ALIAS)
    except MlflowException:
        return None
    return {**found.tags, "version": str(found.version), "name": found.name}


def tag_router_version(uri: str | None, experiment: str, version: str | None, tags: dict[str, Any]) -> str | None:
    """Add tags (e.g. the evaluation's AIQ) to the registered router ``version``: the one the grpo stage
    recorded in its outputs (``grpo_dir/mlflow_run.json``), never found by recency. Returns the version, or
    ``None`` (a warning) when the store does not hold that version: the grpo stage registered it in a store that
    was since removed or moved (``paths.mlflow_db``); the evaluation's own run is logged either way."""
    if not uri or not version:
        return None
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient(tracking_uri=uri)
    name = registered_name(experiment)
    try:
        client.get_model_version(name, str(version))
    except MlflowException:
        logger.warning("%s version %s is not in the MLflow store %s (the grpo stage registered it in a store since "
                       "removed or moved): its evaluation tags are not added; rerun grpo to register it here",
                       name, version, uri)
        return None
    for key, value in mlflow_keys(tags).items():
        client.set_model_version_tag(name, str(version), key, str(value))
    return str(version)


def flat_params(prefix: str, obj: Any) -> dict[str, str]:
    """Flatten a nested config dict into MLflow params (values truncated to MLflow's limit)."""
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for key, value in obj.items():
            out.update(flat_params(f"{prefix}.{key}" if prefix else str(key), value))
    elif isinstance(obj, list) and obj and isinstance(obj[0], dict):
        for i, value in enumerate(obj):
            out.update(flat_params(f"{prefix}.{i}", value))
    else:
        out[prefix] = str(obj)[:6000]
    return out
