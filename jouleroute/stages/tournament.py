"""Stage `tournament`: every candidate answers every query, metered.

Records correctness, latency, tokens, power and energy per (query, candidate) into
paths.profile. Energy comes from Zeus (NVML/RAPL) or a labelled CPU-time estimate.
Resumable: completed batches are saved as shards; a killed run continues where it stopped.

This module is the glue between params, the library (jouleroute/tournament) and MLflow.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import replace
from pathlib import Path

import pandas as pd

from jouleroute.tournament.summary import summarize_profile, summary_metrics, summary_table
from jouleroute.provenance import file_sha256, git_sha, hardware, library_versions
from jouleroute.stages.context import StageContext, write_json
from jouleroute.stages.tournament_inputs import tournament_inputs
from jouleroute.tournament.loading import loading_summary
from jouleroute.tournament.jobs import JobRunner
from jouleroute.tournament.run import run_tournament
from jouleroute.tracking import energy_label

logger = logging.getLogger(__name__)


def profiled_queries(ctx: StageContext, queries: pd.DataFrame) -> pd.DataFrame:
    """The queries the tournament runs: every val and test query, and ``tournament.train_fraction`` of each
    task's train queries (seeded by ``tournament.seed``); below 1, GRPO's live rollouts answer the others."""
    cfg = ctx.params.tournament
    if cfg.train_fraction >= 1:
        return queries
    from jouleroute.sampling import profiled_ids

    train = queries[queries["split"] == "train"]
    keep = set(profiled_ids(train.to_dict("records"), cfg.train_fraction, cfg.seed))
    chosen = queries[(queries["split"] != "train") | queries["query_id"].isin(keep)].reset_index(drop=True)
    logger.info("tournament.train_fraction %g: the tournament profiles %d of %d train queries and every val and test "
                "query; GRPO's live rollouts answer the rest", cfg.train_fraction, len(keep),
                train["query_id"].nunique())
    return chosen


def tournament_stage(ctx: StageContext, run_jobs: JobRunner | None = None,
                     batches_per_job: int | None = None) -> pd.DataFrame:
    """``run_jobs``: where the shard jobs run (default here, serially; flows/tournament.py: Dask)."""
    inputs = tournament_inputs(ctx)
    everything = inputs.queries
    inputs = replace(inputs, queries=profiled_queries(ctx, everything))
    profile = run_tournament(inputs, run_id=uuid.uuid4().hex[:12], progress=ctx.progress, run_jobs=run_jobs,
                             batches_per_job=batches_per_job)
    summary = summarize_profile(profile)
    meta = _run_metadata(ctx, profile)
    if len(inputs.queries) < len(everything):  # a train share: the queries profiled (validate expects exactly these)
        meta["profiled_query_ids"] = sorted(map(str, inputs.queries["query_id"]))
    write_json(ctx.path("profile_meta"), meta)
    write_json(ctx.path("tournament_summary"), summary)
    _log_to_mlflow(ctx, summary, meta)
    logger.info("profile: %d rows -> %s\n%s", len(profile), ctx.path("profile"), summary_table(summary))
    return profile


def _run_metadata(ctx: StageContext, profile: pd.DataFrame) -> dict:
    models_meta = {}
    for name in sorted({c.model for c in ctx.params.pool}):
        manifest = ctx.path("models_dir") / name / "jouleroute-model.json"
        models_meta[name] = manifest.read_text() if manifest.exists() else ctx.params.models[name].model_dump()
    state_file = ctx.path("shards_dir") / "state.json"
    runs = json.loads(state_file.read_text()).get("runs", []) if state_file.exists() else []
    return {
        "git_sha": git_sha(ctx.root),
        "params_hash": ctx.params_hash,
        "queries_sha256": file_sha256(ctx.path("queries")),
        "models": models_meta,
        "hardware": hardware(),
        "libraries": library_versions(),
        "backend": ctx.params.backend.model_dump(),
        "energy": ctx.params.energy.model_dump(),
        "run_state": state_file.read_text() if state_file.exists() else None,
        "energy_sources": sorted(profile["energy_source"].unique()),
        "idle_power_w": recorded_idle_power_w(profile),
        "idle_convention": "energy_j is raw window energy split by the attribution rule; "
                           "energy_net_j subtracts idle_power_w x the row's share of the window time",
        "rows": len(profile),
        # the latest run that computed anything: its model loads and warm-ups, metered apart from the rows
        "model_loading": {"run_id": runs[-1]["run_id"] if runs else None,
                          **loading_summary(runs[-1].get("model_loads", []) if runs else [])},
    }


def recorded_idle_power_w(profile: pd.DataFrame) -> float | dict[str, list[float]] | None:
    """run.json's idle_power_w: the one value when the profile holds one, else each candidate's distinct values
    (its meters measured idle power apart: served candidates on their nodes, Dask workers each on its device)."""
    if not len(profile):
        return None
    values = profile["idle_power_w"].unique()
    if len(values) == 1:
        return float(values[0])
    return {str(cand): sorted(map(float, group.unique()))
            for cand, group in profile.groupby("candidate_id", sort=True)["idle_power_w"]}


def _log_to_mlflow(ctx: StageContext, summary: dict, meta: dict) -> None:
    import tempfile

    from jouleroute.evaluation.plots import plot_candidates

    label = energy_label(meta["energy_sources"])
    with ctx.stage_run("tournament", energy_source=label) as run:
        if run is None:
            return
        with tempfile.TemporaryDirectory() as tmp:
            run.log_artifact(plot_candidates(summary, label, Path(tmp) / "accuracy_vs_energy.png"), "plots")
        run.set_tags({f"energy_source.{cand}": stats["energy_source"] for cand, stats in summary.items()})
        run.log_metrics(summary_metrics(summary))  # the same names as in summary.json
        run.set_tags({"energy_sources": ",".join(meta["energy_sources"])})
        loading = meta["model_loading"]  # apart from the per-query figures above, with its own label
        run.log_metrics({f"model_loading.{phase}_{key}": loading[phase][key] for phase in ("load", "warmup")
                         for key in ("count", "time_s", "energy_j")})
        run.set_tags({"model_loading.energy_source": loading["load"]["energy_source"] or "none"})
        run.log_text(summary_table(summary), "profile_summary.md")
        run.log_dict(summary, "profile_summary.json")
        run.log_dict(meta, "run_metadata.json")
