"""The MLflow UI in a real browser: headless Chromium opens the comparison of two evaluate runs.

The screenshot is kept at artifacts/ui/mlflow-compare.png (CI keeps artifacts/); the rendered DOM
must show a metric name, so a blank or broken page fails.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from jouleroute.evaluation.mlflow_log import log_evaluation
from jouleroute.tracking import stage_run

REPO = Path(__file__).resolve().parents[2]
SHOT = REPO / "artifacts/ui/mlflow-compare.png"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def mlflow_ui(evaluated):
    result, uri, _ = evaluated
    with stage_run(uri, "eval-test", "evaluate", {"git_sha": "def456", "params_hash": "p2"}, {}) as run:
        second = log_evaluation(result, run)
    port = _free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen([str(Path(sys.executable).parent / "mlflow"), "ui", "--backend-store-uri", uri,
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                if urllib.request.urlopen(f"{base}/health", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise AssertionError("the MLflow UI did not start")
        yield base, [result.mlflow_run_id, second]
    finally:
        server.terminate()
        server.wait(timeout=30)


def _chromium(chromium: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--hide-scrollbars", "--window-size=1600,2600", "--virtual-time-budget=20000", *args],
                          capture_output=True, text=True, timeout=180)


def test_mlflow_ui_compares_two_evaluate_runs_in_chromium(chromium, mlflow_ui, evaluated):
    base, run_ids = mlflow_ui
    result, uri, _ = evaluated
    from mlflow import MlflowClient

    exp = MlflowClient(tracking_uri=uri).get_run(run_ids[0]).info.experiment_id
    query = urllib.parse.urlencode({"runs": json.dumps(run_ids), "experiments": json.dumps([exp])})
    url = f"{base}/#/compare-runs?{query}"
    dom = _chromium(chromium, "--dump-dom", url).stdout
    assert "aiq_zero_router" in dom, dom[-2000:]  # a metric of the evaluate runs, as the UI rendered it
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    SHOT.unlink(missing_ok=True)
    _chromium(chromium, f"--screenshot={SHOT}", url)
    assert SHOT.exists() and SHOT.stat().st_size > 20_000


def test_the_link_where_prints_shows_the_aiq_values_without_a_click(chromium, mlflow_ui, evaluated):
    """`jouleroute where` links the latest evaluate run's comparison page: its headline metrics (each family's AIQ
    among them) are rows of the page as it opens, and the run carries the long tail as artifacts, not metrics."""
    from mlflow import MlflowClient

    from jouleroute.commands.where import headline_link

    base, run_ids = mlflow_ui
    result, uri, _ = evaluated
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_ids[0])
    aiq = {k: v for k, v in run.data.metrics.items() if k.startswith("families.") and k.endswith(".aiq")}
    assert aiq and len(run.data.metrics) <= 40, sorted(run.data.metrics)  # the headline, not 700 columns
    top = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert "plots/phase_transition.png" in top, top  # the LM family's, no click into a child run
    dom = _chromium(chromium, "--dump-dom", headline_link(base, run.info.experiment_id, [run.info.run_id])).stdout
    for key, value in aiq.items():
        assert key in dom, (key, dom[-2000:])
        assert f"{value:.3f}"[:4] in dom, (key, value)  # its value is on the page (the UI rounds it)
