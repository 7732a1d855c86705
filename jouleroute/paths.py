"""The single `paths:` section: read by the code and, through DVC templating, by dvc.yaml."""

from __future__ import annotations

from pathlib import Path

from jouleroute.strict import StrictModel


class PathsConfig(StrictModel):
    """Every artifact location, relative to the repository root (DVC's working directory)."""

    # external data (taken from public repositories): never committed; `jouleroute data fetch` fills it
    # (docs/data.md), checked against the committed manifest. The benchmark tasks are read from data_dir,
    # the root's benchmarks/ folder.
    data_root: str = "data/external"
    data_manifest: str = "data/manifest.yaml"
    data_dir: str = "data/external/benchmarks"
    queries: str = "artifacts/prepare/queries.parquet"
    models_dir: str = "artifacts/models"
    shards_dir: str = "artifacts/tournament/shards"
    profile: str = "artifacts/tournament/profile.parquet"
    profile_meta: str = "artifacts/tournament/run.json"
    tournament_summary: str = "artifacts/tournament/summary.json"
    validation_dir: str = "artifacts/validate"
    router_data_dir: str = "artifacts/router_data"
    sft_dir: str = "artifacts/sft"
    grpo_dir: str = "artifacts/grpo"
    budget_dir: str = "artifacts/budget"  # the budget curve: budget.json, budget.png, its routers
    evaluate_dir: str = "artifacts/evaluate"
    embedding_cache: str = "artifacts/cache/embeddings"
    trunk_cache: str = "artifacts/cache/trunk"  # router trunk features (training only; safe to delete)
    mlflow_db: str = "mlruns/mlflow.db"
    study_doc: str = "docs/replay-study.md"  # a study's generated report (study_report); its plot goes beside it
    headline: str = "metrics.json"  # tracked in git: the compact figures of `dvc metrics show/diff`, `dvc exp show`

    def resolve(self, name: str, root: Path) -> Path:
        return (root / getattr(self, name)).resolve()


def relative_to(path: Path, root: Path) -> str:
    """``path`` relative to the repository when it lies inside it (provenance stays machine-independent)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()
