"""MLflow logging of an evaluation, against a real sqlite tracking store in tmp_path."""

from __future__ import annotations

import pytest
from mlflow import MlflowClient

from jouleroute.evaluation.config import DEFAULT_LAMBDAS
from jouleroute.tracking import lambda_step


@pytest.fixture(scope="module")
def logged(evaluated):
    result, uri, root = evaluated  # conftest ran run_evaluate with tracking_uri = sqlite in tmp_path
    return result, MlflowClient(tracking_uri=uri), root


def test_parent_run_has_headline_metrics_tags_and_artifacts(logged):
    result, client, root = logged
    parent = client.get_run(result.mlflow_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["git_sha"] == "abc123" and parent.data.tags["params_hash"] == "p1"
    assert parent.data.tags["energy_source"] == "estimated"
    assert parent.data.tags["run_kind"] == "stage"  # the README's filter finds the parent, not its children
    assert parent.data.metrics["oracle.accuracy"] == pytest.approx(result.metrics["oracle"]["accuracy"])
    # the headline only (the runs table shows it); a router's figures are in its child run and metrics.json
    assert not any(k.startswith("routers.") for k in parent.data.metrics), sorted(parent.data.metrics)
    assert parent.data.metrics["families.utility.aiq"] == pytest.approx(result.metrics["families"]["utility"]["aiq"])
    random = client.search_runs([parent.info.experiment_id], filter_string="tags.run_kind = 'router' and "
                                                                            "attributes.run_name = 'random'")
    assert random[0].data.metrics["with_overhead.aiq"] == pytest.approx(result.metrics["routers"]["random"]["aiq"])
    assert client.get_experiment(parent.info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
    assert parent.data.params == {}  # the stage opened its run with no params here: evaluate logs none of its own
    top = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"metrics.json", "report.json", "report.md", "sweep.csv", "plots"} <= top
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "plots/accuracy_vs_energy.png" in plots
    assert str(root) in client.get_experiment(parent.info.experiment_id).artifact_location  # beside the db
    exp = parent.info.experiment_id
    stage_runs = client.search_runs([exp], filter_string="tags.run_kind = 'stage' and tags.stage = 'evaluate' "
                                                      "and tags.git_sha = 'abc123'")
    assert [r.info.run_id for r in stage_runs] == [parent.info.run_id]


def test_nested_runs_per_family_and_lambda(logged):
    result, client, _ = logged
    exp = client.get_run(result.mlflow_run_id).info.experiment_id
    runs = client.search_runs([exp])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == result.mlflow_run_id]
    names = sorted(r.info.run_name for r in children)
    assert names == ["family utility", "random"]
    family = next(r for r in children if r.info.run_name == "family utility")
    members = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == family.info.run_id]
    assert len(members) == len(DEFAULT_LAMBDAS) and all(r.data.tags["git_sha"] == "abc123" for r in members)
    history = client.get_metric_history(family.info.run_id, "sweep.accuracy")  # charted against λ
    assert sorted(m.step for m in history) == [lambda_step(lam) for lam in sorted(DEFAULT_LAMBDAS)]
    assert family.data.tags["run_kind"] == "family" and family.data.tags["energy_source"] == "estimated"
    artifacts = {a.path for a in client.list_artifacts(family.info.run_id)}
    assert "sweep.json" in artifacts
    assert "plots/phase_transition.png" in {a.path for a in client.list_artifacts(family.info.run_id, "plots")}
    lam_star = result.report["families"]["utility"]["lambda_star"]
    if lam_star is not None:
        assert family.data.metrics["lambda_star"] == pytest.approx(lam_star)
    one = next(r for r in members if r.info.run_name == "utility@0.1")
    assert one.data.params["lam"] == "0.1"
    assert one.data.tags["energy_source.with_overhead"] == "estimated"
    view = result.report["routers"]["utility@0.1"]["views"]["with_overhead"]
    assert one.data.metrics["with_overhead.j_per_query"] == pytest.approx(view["j_per_query"])
    assert one.data.metrics["with_overhead.per_task.gsm8k.accuracy"] == pytest.approx(
        view["per_task"]["gsm8k"]["accuracy"])
