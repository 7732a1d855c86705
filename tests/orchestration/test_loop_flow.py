"""The loop as a user runs it (`jouleroute-flow loop`, then `deploy --flow loop`), on a tiny repository under real
DVC and a real Prefect server: captured traffic becomes the loop pipeline's queries, the pipeline runs stage by
stage, the first candidate is served, new traffic reruns the tournament for the new pairs only and ends in a
recorded decision that the served version follows, a run with nothing new decides nothing, and the Prefect UI
shows the loop deployment's runs (a scheduled run with nothing new: `Unchanged`).

The module's tests run in order on one repository.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pandas as pd
import pytest

from flows.cli import main as flow_cli
from jouleroute.gateway.capture import FEEDBACK, CaptureConfig, CaptureWriter, capture_record
from jouleroute.loop import serving
from jouleroute.loop.workspace import Workspace
from tests.orchestration.conftest import small_params
from tests.orchestration.test_scheduled_pipeline import api, task_runs, wait_done
from tests.pipeline.conftest import BIN, REPO, make_repo, run

pytestmark = pytest.mark.timeout(900)

LOOP = "loops/tiny"
CANDIDATES = ("tiny-direct", "tiny-loglik", "tiny-fewshot")
STEPS = ["fold", "data-version", "prepare", "tournament", "labels", "validate", "router_data", "sft", "grpo",
         "evaluate", "gate", "promote", "record"]


# a schedule that never fires while the tests run: an hourly one fired at the top of the hour during a suite and
# folded the next test's traffic first (the test then saw iteration 3)
YEARLY = "0 0 1 1 *"

def capture(folder, first: int, n: int) -> None:
    """``n`` served requests as the gateway's capture writes them, and a user's score of each candidate's answer
    to each (`POST /v1/feedback` names the candidate): a random model's answers are often unreadable, so without
    them the labels would leave queries out, which evaluate cannot score. Every score is 0: validation refuses an
    unreadable answer labelled correct, and a random model's answers are mostly unreadable."""
    writer = CaptureWriter(CaptureConfig(folder=str(folder)), folder)
    for i in range(first, first + n):
        body = {"model": "jouleroute-auto", "messages": [{"role": "user", "content": f"What is {i} plus {i + 3}?"}]}
        usage = {"candidate": "tiny-direct", "energy_j": 0.5, "energy_source": "estimated"}
        writer.offer(capture_record(f"req-{i:04d}", body, "", True, "route:first", 200, 0.05, usage, "7", None))
        for candidate in CANDIDATES:
            writer.offer({"request_id": f"req-{i:04d}", "candidate": candidate, "score": 0.0,
                          "created": time.time()}, FEEDBACK)
        time.sleep(0.002)  # distinct times: the newest requests are the test split
    deadline = time.monotonic() + 10
    while writer.written["capture"] + writer.written[FEEDBACK] < 4 * n and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.close()


@pytest.fixture(scope="module")
def repo(tmp_path_factory, tiny_model):
    params = small_params(tiny_model)
    root = make_repo(tmp_path_factory.mktemp("loop") / "repo", params)
    run([str(BIN / "dvc"), "repro", "models"], root)  # the converted models the loop's stages share
    return root


@pytest.fixture(scope="module")
def ws(repo) -> Workspace:
    assert flow_cli(["--root", str(repo), "loop", "--init", LOOP, "--capture", "capture",
                     "--labels", "reference:tiny-direct"]) == 0
    return Workspace(repo, repo / LOOP)


def test_a_loop_without_a_workspace_is_refused_in_one_line(repo, capsys):
    assert flow_cli(["--root", str(repo), "--params", "loops/none/params.yaml", "loop"]) == 2
    err = capsys.readouterr().err
    assert "no loop here" in err and "loop --init" in err and "Traceback" not in err


def test_first_iteration_serves_the_loops_first_policy(prefect_server, ws, capsys):
    capture(ws.root / "capture", 0, 20)
    assert flow_cli(["--root", str(ws.root), "--params", f"{LOOP}/params.yaml", "loop"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "jouleroute-loop: Completed: promote" in out and "nothing served yet" in out
    served = serving.serving_folder(ws.serving)
    assert served is not None and (served / "queries.parquet").is_file()
    record = json.loads((served / "champion.json").read_text())
    assert record["trained_on"]["prompts"]["md5"]  # the served policy names the traffic it learned from
    assert record["trained_on"]["feedback"]["md5"]
    queries = pd.read_parquet(served / "queries.parquet")
    assert len(queries) == 20 and set(queries.loc[queries["split"] == "test", "question"]) == {
        f"What is {i} plus {i + 3}?" for i in range(16, 20)}  # the newest traffic is the test split
    assert (ws.folder / "data/prompts.jsonl.dvc").is_file()  # a DVC-tracked version of the traffic


@pytest.fixture(scope="module")
def deployment(prefect_server, ws):
    done = subprocess.run([str(BIN / "jouleroute-flow"), "--params", f"{LOOP}/params.yaml", "deploy", "--flow",
                           "loop", "--cron", YEARLY], cwd=ws.root, env=prefect_server["env"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "jouleroute-loop/loop-tiny" in done.stdout
    yield api(prefect_server, "GET", "/deployments/name/jouleroute-loop/loop-tiny")
    subprocess.run([str(BIN / "jouleroute-flow"), "stop", "--name", "loop-tiny"], cwd=ws.root,
                   env=prefect_server["env"], timeout=60)


def test_the_loop_deployment_runs_on_its_schedule_and_the_ui_shows_its_runs(chromium, prefect_server, deployment,
                                                                           ws):
    (schedule,) = deployment["schedules"]
    assert schedule["schedule"]["cron"] == YEARLY and deployment["global_concurrency_limit"]["limit"] == 1
    assert deployment["parameters"] == {"params_path": str(ws.params_file), "root": str(ws.root)}
    run_id = api(prefect_server, "POST", f"/deployments/{deployment['id']}/create_flow_run", json={})["id"]
    flow_run = wait_done(prefect_server, [run_id], timeout_s=600)[run_id]
    assert flow_run["state_type"] == "COMPLETED", flow_run["state"]
    assert flow_run["state_name"] == "Unchanged"  # no traffic since the first decision: nothing recomputed
    assert flow_run["state"]["message"] == "no new traffic since iteration 1: nothing recomputed, no decision"
    assert sorted(task_runs(prefect_server, run_id)) == ["data-version", "fold"]

    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--window-size=1440,900", "--virtual-time-budget=20000"]

    def rendered(page: str) -> str:
        dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True, timeout=120).stdout
        return " ".join(re.sub(r"<[^>]+>", " ", dom).split())

    text = rendered(f"{prefect_server['ui']}/deployments/deployment/{deployment['id']}")
    in_words = "only in January"  # the yearly cron, as the UI words it
    assert "Deployment: loop-tiny" in text and "jouleroute-loop" in text and in_words in text, text[:2000]
    page = f"{prefect_server['ui']}/runs/flow-run/{run_id}"
    text = rendered(page)  # the run the deployment made, with its state and task runs, in the UI
    assert flow_run["name"] in text and "loop-tiny" in text and "Unchanged" in text, text[:3000]
    shot = REPO / "artifacts/ui/prefect-loop-deployment.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([*flags, f"--screenshot={shot}", page], capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_new_traffic_reruns_only_new_pairs_and_the_served_version_follows_the_decision(prefect_server, ws):
    from prefect.client.orchestration import get_client  # noqa: F401  (the flow below talks to the same server)

    before = serving.policy_version(serving.serving_folder(ws.serving))
    capture(ws.root / "capture", 20, 10)
    from flows.loop import loop

    state = loop(params_path=str(ws.params_file), root=str(ws.root), return_state=True)
    assert state.is_completed(), state.message
    entry = state.result()
    assert entry["folded"]["prompts"] == 10 and entry["iteration"] == 2
    tasks = task_runs(prefect_server, str(state.state_details.flow_run_id))
    assert sorted(tasks) == sorted(STEPS), sorted(tasks)  # one task run per step and per stage
    logs = api(prefect_server, "POST", "/logs/filter",
               json={"logs": {"task_run_id": {"any_": [tasks["tournament"]["id"]]}}, "limit": 200})
    assert any("pairs already done" in e["message"] for e in logs)  # resumed: only the new pairs ran
    now = serving.policy_version(serving.serving_folder(ws.serving))
    if entry["decision"] == "promote":
        assert now == entry["served"] != before
    else:
        assert now == entry["served"] == before
    assert entry["gate"]["n_queries"] >= 1 and entry["gate"]["accuracy_diff_ci"] is not None

    again = loop(params_path=str(ws.params_file), root=str(ws.root), return_state=True)
    assert again.name == "Unchanged" and "no new traffic since iteration 2" in again.message
    assert len(ws.report_jsonl.read_text().splitlines()) == 2  # no second decision on the same traffic
