"""The Prefect flow runs the same stage functions, against a real (temporary) Prefect server."""

from __future__ import annotations

import pytest
import yaml

from tests.pipeline.conftest import REPO, tiny_params


@pytest.mark.timeout(600)
def test_flow_runs_stages_as_prefect_tasks(tmp_path, tiny_model, monkeypatch):
    from prefect.testing.utilities import prefect_test_harness

    params = tiny_params(tiny_model)
    params["paths"]["data_dir"] = str(REPO / "data/benchmarks")
    params["tracking"]["enabled"] = False
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.chdir(tmp_path)
    with prefect_test_harness(server_startup_timeout=180):
        from jouleroute_flows.pipeline import pipeline

        state = pipeline(params_path=str(tmp_path / "params.yaml"), root=str(tmp_path),
                         stages=["prepare", "tournament", "validate"], via_dvc=False, return_state=True)
        assert state.is_completed(), state
        assert state.result() == ["prepare: ok", "tournament: ok", "validate: ok"]
    assert (tmp_path / "artifacts/validate/report.json").exists()


def test_flow_rejects_unknown_stage():
    from jouleroute_flows.pipeline import pipeline

    with pytest.raises(ValueError, match="unknown stage"):
        pipeline.fn(stages=["tournament", "deploy"], via_dvc=False)
