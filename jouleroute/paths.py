"""The single `paths:` section: read by the code and, through DVC templating, by dvc.yaml."""

from __future__ import annotations

from pathlib import Path

from jouleroute.strict import StrictModel


ARTIFACTS = "artifacts"  # what the stages write: each stage's outputs in a folder of its name


def artifact(*parts: str) -> str:
    """``artifacts/<stage>/<file>``: where a stage's output lives by default."""
    return "/".join((ARTIFACTS, *parts))


class PathsConfig(StrictModel):
    """Every artifact location, relative to the project root, in every params file (the main one, a study's, a pool's,
    a copy): the stages run there, a study's too (its dvc.yaml's ``wdir``)."""

    # external data (taken from public repositories): never committed; `jouleroute data fetch` fills it
    # (docs/data.md), checked against the committed manifest. The benchmark tasks are read from data_dir,
    # the root's benchmarks/ folder.
    data_root: str = "data/external"
    data_manifest: str = "data/manifest.yaml"
    data_dir: str = "data/external/benchmarks"
    queries: str = artifact("prepare", "queries.parquet")
    models_dir: str = artifact("models")
    shards_dir: str = artifact("tournament", "shards")
    # pairs that grpo's and budget's live rollouts answered (grpo.reward_source: live): a cache, declared by no
    # stage; the tournament reads it (never writes it), deleting it only means those pairs are run again
    live_pairs_dir: str = artifact("cache", "live_pairs")
    profile: str = artifact("tournament", "profile.parquet")
    profile_meta: str = artifact("tournament", "run.json")
    # stage `labels`: the profile every later stage trains on, each row's `correct` from labels.source (gold, a
    # reference, a vote, feedback) with its `label_source`; unlabelled queries left out (counted in summary.json)
    labels_dir: str = artifact("labels")
    labelled_profile: str = artifact("labels", "profile.parquet")
    tournament_summary: str = artifact("tournament", "summary.json")
    validation_dir: str = artifact("validate")
    router_data_dir: str = artifact("router_data")
    sft_dir: str = artifact("sft")
    grpo_dir: str = artifact("grpo")
    budget_dir: str = artifact("budget")  # the budget curve: budget.json, budget.png, its routers
    evaluate_dir: str = artifact("evaluate")
    embedding_cache: str = artifact("cache", "embeddings")
    trunk_cache: str = artifact("cache", "trunk")  # router trunk features (training only; safe to delete)
    mlflow_db: str = "mlruns/mlflow.db"
    study_doc: str = "docs/replay-study.md"  # a study's generated page (study_page); its plot goes beside it
    headline: str = "metrics.json"  # tracked in git: the compact figures of `dvc metrics show/diff`, `dvc exp show`
    # a pipeline trained on labels without gold: the headline of the same pool's pipeline trained on gold, whose
    # deployed point its study page shows beside its own (the no-gold presets, scripts/no_gold_studies.py)
    gold_headline: str | None = None

    def resolve(self, name: str, root: Path) -> Path:
        return (root / getattr(self, name)).resolve()


def relative_to(path: Path, root: Path) -> str:
    """``path`` relative to the repository when it lies inside it (provenance stays machine-independent)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


# Where a params file that is no pipeline's own (a copy of params.yaml) may write: every output key is moved under a
# namespace of its name, so a copy never overwrites what a dvc.yaml tracks. Inputs and the content-keyed caches
# stay shared: the external data root and its manifest, the benchmark data, the converted models (a copy that converts models needs paths.models_dir of its
# own, refused otherwise), the embedding and trunk-feature caches.
SHARED_PATHS = ("data_root", "data_manifest", "data_dir", "models_dir", "embedding_cache", "trunk_cache",
                "gold_headline")  # inputs and caches a copy reads where they are (gold_headline: another pipeline's)


def namespace_of(params_path: Path) -> str:
    """``copy.yaml`` -> ``copy``; ``exps/a/params.yaml`` -> ``a`` (lower-case, safe in a path)."""
    import re

    name = params_path.parent.name if params_path.stem == "params" else params_path.stem
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-.") or "copy"


def namespaced(paths: PathsConfig, main: PathsConfig, name: str) -> tuple[PathsConfig, list[str]]:
    """``paths`` with every output that is still the main pipeline's (the same value as ``main``) moved under
    ``artifacts/<name>/`` (``mlruns/<name>/`` for the MLflow store); the keys moved. A value the copy chose
    (``paths:`` says otherwise) is kept."""
    moved, update = [], {}
    for key in type(paths).model_fields:
        value = getattr(paths, key)
        if value is None or key in SHARED_PATHS or value != getattr(main, key):
            continue
        head, _, rest = value.partition("/")
        update[key] = f"{head}/{name}/{rest}" if head in (ARTIFACTS, "mlruns") and rest else artifact(name, value)
        moved.append(key)
    return paths.model_copy(update=update), moved
