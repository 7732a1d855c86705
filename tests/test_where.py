"""`jouleroute where`'s overhead lines: a J/query that counts no router overhead never reads like a measurement."""

from __future__ import annotations

from pathlib import Path

from jouleroute.commands.where import overhead_lines

CACHE = Path("artifacts/cache/overhead")


def test_a_measured_overhead_is_split_out_with_its_source():
    lines = overhead_lines({"lam": 0.5, "j_per_query": 2.5, "j_models_only": 2.0, "energy_source": "estimated"}, CACHE)
    assert lines[0].endswith("2.5 = 2 for the answers + 0.5 lm overhead")
    assert lines[1] == "(the overhead is estimated, measured once per machine and router: artifacts/cache/overhead/)"


def test_no_overhead_counted_says_so_instead_of_quoting_a_zero():
    """The replay study: a modelled pool, the router metered on the CPU (estimated): the headline view is models
    only. It printed "+ 0 lm overhead" and "(the overhead is modelled, measured once per machine ...)"."""
    lines = overhead_lines({"lam": 0.5, "j_per_query": 41.2, "j_models_only": 41.2, "energy_source": "modelled"}, CACHE)
    assert len(lines) == 1 and "no router overhead is included" in lines[0]
    assert "measured once per machine" not in lines[0] and "0 lm overhead" not in lines[0]
    assert overhead_lines({"lam": 0.5, "j_per_query": 1.0}, CACHE) == []


def test_the_headline_link_leads_to_the_latest_finished_evaluate_run_not_a_failed_one(tmp_path, capsys):
    """A real MLflow sqlite store: an evaluate run that finished, then one that failed. `where` prints both statuses
    (the failed one is the latest) but links the finished one, which has the figures."""
    from types import SimpleNamespace

    from mlflow import MlflowClient

    from jouleroute.commands.where import _print_stage_runs

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment("x", artifact_location=(tmp_path / "art").as_uri())
    runs = []
    for start, status in ((1_000, "FINISHED"), (2_000, "FAILED")):
        run = client.create_run(exp, start_time=start, tags={"run_kind": "stage", "stage": "evaluate",
                                                             "energy_source": "estimated"})
        client.set_terminated(run.info.run_id, status)
        runs.append(run.info.run_id)
    ctx = SimpleNamespace(tracking_uri=uri, path=lambda name: db, params=SimpleNamespace(tracking=SimpleNamespace(
        experiment="x")))
    experiment, finished = _print_stage_runs(ctx)
    assert experiment == exp and finished["evaluate"].info.run_id == runs[0]
    assert "FAILED" in capsys.readouterr().out  # the latest run's status is still shown
