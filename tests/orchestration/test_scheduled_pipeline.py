"""Scheduled reruns as a user runs them: `jouleroute-flow deploy` against a real Prefect server.

The module's tests run in order on one repository and one served deployment.
"""

from __future__ import annotations

import re
import subprocess
import time

import httpx
import pytest
import yaml

from flows.cli import main as flow_cli
from tasks.version import stage_version
from tests.orchestration.conftest import free_port, small_params
from tests.pipeline.conftest import BIN, REPO, make_repo

pytestmark = pytest.mark.timeout(600)

STAGES = ["prepare", "models", "tournament"]  # the stages up to the profile: enough, and fast
DEPLOYMENT = "jouleroute-pipeline/test-nightly"


def api(server, method: str, path: str, **kw):
    response = httpx.request(method, f"{server['url']}{path}", timeout=30, **kw)
    response.raise_for_status()
    return response.json()


def wait_done(server, run_ids: list[str], timeout_s: float = 300) -> dict[str, dict]:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        runs = {i: api(server, "GET", f"/flow_runs/{i}") for i in run_ids}
        if all(r["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") for r in runs.values()):
            return runs
        time.sleep(1)
    raise AssertionError(f"flow runs did not finish: {[(r['name'], r['state_name']) for r in runs.values()]}")


def task_runs(server, run_id: str) -> dict[str, dict]:
    found = api(server, "POST", "/task_runs/filter", json={"flow_runs": {"id": {"any_": [run_id]}}})
    return {t["name"]: t for t in found}


@pytest.fixture(scope="module")
def repo(tmp_path_factory, tiny_model):
    return make_repo(tmp_path_factory.mktemp("scheduled") / "repo", small_params(tiny_model))


@pytest.fixture(scope="module")
def deployment(prefect_server, repo):
    done = subprocess.run([str(BIN / "jouleroute-flow"), "deploy", "--cron", "0 3 * * *", "--timezone",
                           "Europe/Berlin", "--name", "test-nightly", "--stages", *STAGES],
                          cwd=repo, env=prefect_server["env"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "served in the background" in done.stdout  # the command returned: serving does not block it
    yield api(prefect_server, "GET", f"/deployments/name/{DEPLOYMENT}")
    subprocess.run([str(BIN / "jouleroute-flow"), "stop", "--name", "test-nightly"], cwd=repo,
                   env=prefect_server["env"], timeout=60)


def test_deploy_is_refused_up_front_without_a_server_or_with_a_bad_stage(repo, capsys):
    dead = f"http://127.0.0.1:{free_port()}/api"
    assert flow_cli(["--root", str(repo), "deploy", "--cron", "0 3 * * *", "--api-url", dead]) == 2
    assert f"no Prefect server answers at {dead}" in capsys.readouterr().err
    assert flow_cli(["--root", str(repo), "deploy", "--cron", "0 3 * * *", "--stages", "evalute",
                     "--api-url", dead]) == 2
    assert "unknown stage(s) evalute" in capsys.readouterr().err
    assert not (repo / "artifacts" / "prefect").exists()  # nothing was started
    copy = repo / "copy.yaml"  # a params copy drives no dvc.yaml: refused as `jouleroute repro` refuses it
    copy.write_text((repo / "params.yaml").read_text())
    assert flow_cli(["--root", str(repo), "--params", str(copy), "run", "--stages", "prepare"]) == 2
    assert "copy.yaml is a params copy" in capsys.readouterr().err
    assert flow_cli(["--root", str(repo), "stop", "--name", "typo"]) == 1  # nothing stopped: no success
    copy.unlink()


def test_deployment_has_its_schedule_timezone_and_limit(deployment):
    (schedule,) = deployment["schedules"]
    assert schedule["schedule"]["cron"] == "0 3 * * *"
    assert schedule["schedule"]["timezone"] == "Europe/Berlin"
    assert schedule["active"] and not deployment["paused"]
    assert deployment["global_concurrency_limit"]["limit"] == 1
    assert deployment["parameters"]["stages"] == STAGES


def test_two_triggered_runs_queue_one_computes_the_other_recomputes_nothing(prefect_server, deployment, repo):
    """Two runs triggered together: the concurrency limit holds the second until the first is done;
    the first computes every stage, the second finds all of them up to date."""
    ids = [api(prefect_server, "POST", f"/deployments/{deployment['id']}/create_flow_run", json={})["id"]
           for _ in range(2)]
    runs = wait_done(prefect_server, ids)
    assert all(r["state_type"] == "COMPLETED" for r in runs.values()), [r["state"] for r in runs.values()]
    first, second = sorted(runs.values(), key=lambda r: r["start_time"])
    assert first["end_time"] <= second["start_time"], "the pipeline ran twice at once"
    waited = [s["name"] for i in ids for s in api(prefect_server, "GET", f"/flow_run_states/?flow_run_id={i}")]
    assert "AwaitingConcurrencySlot" in waited  # held back by the deployment's limit, not by luck

    tasks = task_runs(prefect_server, first["id"])
    assert sorted(tasks) == sorted(STAGES)
    for name, task in tasks.items():
        assert task["state_name"] == "Completed", (name, task["state_name"])  # computed, not skipped
        assert task["task_version"] == stage_version(repo, name)[0]  # the deps + params it ran on
    assert len({t["task_version"] for t in tasks.values()}) == len(STAGES)
    assert first["state"]["message"] == f"{len(STAGES)} of {len(STAGES)} stage(s) recomputed"
    logs = api(prefect_server, "POST", "/logs/filter",
               json={"logs": {"task_run_id": {"any_": [tasks["tournament"]["id"]]}}, "limit": 200})
    text = "\n".join(entry["message"] for entry in logs)
    assert "Running stage 'tournament'" in text and "pairs already done" in text  # the stage's own log lines
    assert (repo / "artifacts/tournament/profile.parquet").exists()

    again = task_runs(prefect_server, second["id"])
    assert {name: t["state_name"] for name, t in again.items()} == {s: "Unchanged" for s in STAGES}
    assert {name: t["task_version"] for name, t in again.items()} == {n: t["task_version"] for n, t in tasks.items()}
    assert second["state"]["message"] == f"0 of {len(STAGES)} stage(s) recomputed"


def test_failed_stage_fails_the_run_with_the_stage_error(prefect_server, deployment, repo):
    params = yaml.safe_load((repo / "params.yaml").read_text())
    broken = {**params, "prepare": {**params["prepare"], "sample": 3}}
    (repo / "params.yaml").write_text(yaml.safe_dump(broken, sort_keys=False))
    try:
        run_id = api(prefect_server, "POST", f"/deployments/{deployment['id']}/create_flow_run", json={})["id"]
        run = wait_done(prefect_server, [run_id])[run_id]
    finally:
        (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    assert run["state_type"] == "FAILED"
    assert run["state"]["message"].startswith("stage prepare failed: jouleroute prepare:"), run["state"]["message"]
    assert "prepare.sample" in run["state"]["message"]
    assert list(task_runs(prefect_server, run_id)) == ["prepare"]  # nothing ran after the failed stage


def test_ui_shows_the_deployment_and_its_schedule_in_a_real_browser(chromium, prefect_server, deployment):
    """Headless Chromium renders the Prefect UI's deployment page (the UI's own JS calling the API)."""
    page = f"{prefect_server['ui']}/deployments/deployment/{deployment['id']}"
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--window-size=1440,900", "--virtual-time-budget=20000"]
    dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True, timeout=120).stdout
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    assert "Deployment: test-nightly" in text, text[:2000]
    assert "At 03:00 AM every day" in text, text[:2000]  # the UI's rendering of "0 3 * * *"
    shot = REPO / "artifacts/ui/prefect-deployment.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([*flags, f"--screenshot={shot}", page], capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
