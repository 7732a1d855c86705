"""A real Prefect server (subprocess, free loopback port, its own PREFECT_HOME) and tiny repositories.

Every orchestration test talks to this server over HTTP, as a user's `jouleroute-flow`
would; nothing is mocked. The server's concurrency-slot wait is cut from 30 s to 1 s
so the test of "one run at a time" does not idle.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.pipeline.conftest import BIN, tiny_params


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """``{"url", "env"}``: a running server; ``env`` is what a client process needs to reach it."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    home = tmp_path_factory.mktemp("prefect-home")
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": url, "PREFECT_UI_API_URL": url,
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_DEPLOYMENTS_CONCURRENCY_SLOT_WAIT_SECONDS": "1",
           "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false"}
    log = open(home / "server.log", "wb")
    proc = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 180
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            raise RuntimeError(f"prefect server did not start:\n{(home / 'server.log').read_text()[-3000:]}")
        time.sleep(0.5)
    saved = {k: os.environ.get(k) for k in ("PREFECT_API_URL", "PREFECT_HOME")}
    os.environ.update(PREFECT_API_URL=url, PREFECT_HOME=str(home))  # for processes this session spawns (Dask)
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):  # for flows run in this process
            yield {"url": url, "env": env, "ui": url.removesuffix("/api")}
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from jouleroute.backends.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-model"))


def small_params(model_dir: Path, **overrides) -> dict:
    """The pipeline tests' tiny params, at one query per task: every stage runs, in seconds."""
    params = tiny_params(model_dir)
    params["prepare"]["samples"] = {t: 1 for t in params["prepare"]["samples"]}
    for cand in params["pool"]:
        cand["batch_size"] = 2
    params["energy"]["idle_seconds"] = 0.1
    params["tracking"]["enabled"] = False  # MLflow's first sqlite migration alone costs seconds per stage
    params.update(overrides)
    return params


