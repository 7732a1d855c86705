"""The UIs' ports: `make ui-mlflow PORT=...` serves on that port and `jouleroute where` links to it;
the Prefect targets pass PORT on; a bad PORT is one line before anything starts."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from jouleroute.commands import ports
from jouleroute.commands.where import where_command
from jouleroute.stages.context import StageContext

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _where(root: Path, capsys) -> str:
    where_command(StageContext.load(REPO / "params.yaml", root=root))
    return capsys.readouterr().out


def test_where_prints_the_recorded_port_else_the_default(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    out = _where(tmp_path, capsys)
    assert "http://127.0.0.1:5000" in out and "http://127.0.0.1:4200" in out
    ports.record(tmp_path, "mlflow", 5050)
    ports.record(tmp_path, "prefect", 4300)
    out = _where(tmp_path, capsys)
    assert "PORT=5050  -> http://127.0.0.1:5050" in out and "http://127.0.0.1:4300" in out
    assert ":5000" not in out and ":4200" not in out
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4444/api")  # the server the flows use wins
    assert "http://127.0.0.1:4444" in _where(tmp_path, capsys)


def test_a_bad_port_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert ports.main(["mlflow", "50x0"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert not (tmp_path / ports.RECORD).exists()


def test_the_prefect_targets_pass_the_port_on():
    for target in ("ui-prefect", "prefect-server"):
        plan = subprocess.run(["make", "-n", target, "PORT=4321"], cwd=REPO, capture_output=True, text=True).stdout
        assert "--port 4321" in plan and "4200" not in plan, plan


@pytest.mark.timeout(180)
def test_make_ui_mlflow_serves_on_port_and_where_links_to_it(tmp_path, capsys):
    port = _free_port()
    recorded = REPO / ports.RECORD  # the target records the port in the repository: put back what was there
    before = recorded.read_text() if recorded.exists() else None
    # the real target, on an empty store of its own (STORE), in a new session so all its workers stop together
    ui = subprocess.Popen(["make", "--no-print-directory", "ui-mlflow", f"PORT={port}", f"STORE={tmp_path}"],
                          cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while True:
            assert ui.poll() is None, ui.stderr.read().decode()[-2000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the MLflow UI did not answer"
            time.sleep(0.5)
        assert ports.ui_port(REPO, "mlflow")[0] == port
        assert f"http://127.0.0.1:{port}" in _where(REPO, capsys)
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        ui.wait(timeout=30)
        if before is None:
            recorded.unlink(missing_ok=True)
        else:
            recorded.write_text(before)
