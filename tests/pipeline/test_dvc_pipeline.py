"""The whole pipeline under real DVC, on a tiny local model: outputs, caching, partial reruns, MLflow.

The tests in this module run in order on one repository (a session fixture).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from tests.pipeline.conftest import BIN, run

pytestmark = pytest.mark.timeout(1200)

STAGES = ("prepare", "models", "tournament", "validate", "router_data", "sft", "grpo", "evaluate")


def ran(stdout: str) -> set[str]:
    return {s for s in STAGES if f"Running stage '{s}'" in stdout}


def edit_params(root, edit) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    edit(params)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def stale(root) -> set[str]:
    """Stages `dvc status` reports as changed (params or deps)."""
    out = run([str(BIN / "dvc"), "status"], root).stdout
    return {s for s in STAGES if f"\n{s}:" in "\n" + out}


def test_first_repro_runs_every_stage_and_writes_results(tiny_repo):
    done = run([str(BIN / "dvc"), "repro"], tiny_repo)
    # (another test module may already have reproduced up to `validate` on this shared repository)
    assert {"router_data", "sft", "grpo", "evaluate"} <= ran(done.stdout)
    assert run([str(BIN / "dvc"), "status"], tiny_repo).stdout.strip().endswith("Data and pipelines are up to date.")
    queries = pd.read_parquet(tiny_repo / "artifacts/prepare/queries.parquet")
    profile = pd.read_parquet(tiny_repo / "artifacts/tournament/profile.parquet")
    assert set(profile["task"]) == {"gsm8k", "math500", "mmlu", "arc_challenge", "arc_easy", "hellaswag", "bbh"}
    assert not profile.duplicated(["query_id", "candidate_id"]).any()
    assert len(profile) == len(queries) * 3
    assert set(profile["energy_source"]) == {"estimated"}  # no GPU, no RAPL here: labelled estimate
    assert (profile["energy_j"] > 0).all()
    report = json.loads((tiny_repo / "artifacts/validate/report.json").read_text())
    assert report["success"] is True
    assert (tiny_repo / "artifacts/grpo/model/config.json").exists()
    metrics = json.loads((tiny_repo / "artifacts/evaluate/metrics.json").read_text())
    assert metrics
    plots = sorted((tiny_repo / "artifacts/evaluate/plots").glob("*.png"))
    assert len(plots) >= 3, plots  # accuracy-vs-energy, the λ sweep, the routing mix
    assert all(png.stat().st_size > 5_000 for png in plots)


def test_study_report_is_generated_from_the_run(tiny_repo):
    """The report writer behind docs/replay-study.md, on this run's real evaluate + grpo outputs."""
    run([str(BIN / "jouleroute"), "study_report"], tiny_repo)
    text = (tiny_repo / "docs/replay-study.md").read_text()
    report = json.loads((tiny_repo / "artifacts/evaluate/report.json").read_text())
    for name in report["singles"]:
        assert f"| {name} |" in text
    assert "**oracle**" in text and "## Targets" in text
    assert "Every energy figure here is `estimated`" in text  # the profile's own label, not a typed one
    heldout = json.loads((tiny_repo / "artifacts/grpo/metrics.json").read_text())["heldout"]
    assert "## Held-out check" in text and f"routes {heldout['overall']['n']} (val query, λ) rows" in text


def test_mlflow_holds_tournament_training_and_evaluation_runs(tiny_repo):
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tiny_repo / 'mlruns/mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["jouleroute"])
    names = set(runs["tags.mlflow.runName"])
    assert {"tournament", "sft", "grpo", "evaluate"} <= names
    tournament = runs[runs["tags.mlflow.runName"] == "tournament"].iloc[0]
    for metric in ("accuracy", "energy_j_mean", "energy_j_p95", "latency_s_p50", "latency_s_p95"):
        assert f"metrics.tiny-direct/{metric}" in runs.columns, metric
    if tournament["metrics.tiny-direct/accuracy"] > 0:  # J per correct answer is undefined with none correct
        assert "metrics.tiny-direct/j_per_correct" in runs.columns
    assert tournament["tags.energy_sources"] == "estimated"


def test_second_repro_does_nothing(tiny_repo):
    done = run([str(BIN / "dvc"), "repro"], tiny_repo)
    assert ran(done.stdout) == set(), done.stdout


def test_changing_lambda_makes_only_grpo_stale(tiny_repo):
    original = yaml.safe_load((tiny_repo / "params.yaml").read_text())["grpo"].get("lambdas")
    edit_params(tiny_repo, lambda p: p["grpo"].update(lambdas=[0.0, 0.5, 2.0]))
    assert stale(tiny_repo) == {"grpo"}  # evaluate then follows through grpo's output; nothing upstream
    edit_params(tiny_repo, lambda p: p["grpo"].update(lambdas=original) if original else p["grpo"].pop("lambdas"))
    assert stale(tiny_repo) == set()


def test_changing_one_candidate_reruns_only_that_candidate(tiny_repo):
    before = pd.read_parquet(tiny_repo / "artifacts/tournament/profile.parquet")
    edit_params(tiny_repo, lambda p: p["pool"][0].update(max_new_tokens=4))
    assert stale(tiny_repo) == {"tournament"}
    done = run([str(BIN / "dvc"), "repro", "tournament"], tiny_repo)
    assert ran(done.stdout) == {"tournament"}  # prepare and models are untouched
    assert stale(tiny_repo) == {"validate", "router_data", "evaluate"}  # everything that reads the profile
    after = pd.read_parquet(tiny_repo / "artifacts/tournament/profile.parquet")
    changed = set(after.loc[~after["run_id"].isin(set(before["run_id"])), "candidate_id"])
    assert changed == {"tiny-direct"}  # the other candidates' shards were reused


def test_dvc_metrics_show_lists_headline(tiny_repo):
    done = run([str(BIN / "dvc"), "metrics", "show"], tiny_repo)
    assert "aiq" in done.stdout.lower()
