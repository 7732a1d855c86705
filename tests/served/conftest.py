"""Two upstream servers on loopback (the bundled OpenAI-compatible server over a tiny random model, each in a
thread of the test process: a real HTTP server, without a second torch start-up), each with its own exporter
process (`jouleroute meter`, its counter stubbed at the NVML boundary: tests/served/stub_counter.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
J_PER_TOKEN = {"short": 0.5, "long": 0.5}  # joules the stub counter adds per generated token
IDLE_W = 2.0  # the stub counter's idle draw
STUB = "tests.served.stub_counter:TokenCounter"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, "-m", "jouleroute", *args], cwd=log.parent, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def start(args: list[str], ready_url: str, log: Path) -> subprocess.Popen:
    return wait_ready(launch(args, log), args, ready_url, log)


def wait_ready(proc: subprocess.Popen, args: list[str], ready_url: str, log: Path) -> subprocess.Popen:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{args} exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(ready_url, timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{args} did not become ready: {log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def launch_meter(server_url: str, log: Path) -> tuple[subprocess.Popen, str, list[str]]:
    port = free_port()
    args = ["meter", "--port", str(port), "--counter", STUB, "--counter-arg", f"server={server_url}/metrics",
            "--counter-arg", "j_per_token=0.5", "--counter-arg", f"idle_w={IDLE_W}"]
    return launch(args, log), f"http://127.0.0.1:{port}/metrics", args


def start_meter(server_url: str, log: Path) -> tuple[subprocess.Popen, str]:
    proc, url, args = launch_meter(server_url, log)
    return wait_ready(proc, args, url, log), url


@pytest.fixture(scope="package")
def pool(tmp_path_factory):
    """``{name: {"server": /v1 root, "exporter": metrics url, "root": server root}}`` for names a and b."""
    from jouleroute.backends.tiny import build_tiny_llama

    root = tmp_path_factory.mktemp("served")
    procs, out, servers = [], {}, []
    try:
        from jouleroute.backends.serve import ServerThread, create_app
        from jouleroute.backends.transformers_backend import TransformersBackend

        folder = build_tiny_llama(root / "tiny")  # one model, two servers: candidates differ by how they are asked
        for name in ("a", "b"):
            backend = TransformersBackend(str(folder), device="cpu", torch_threads=1)
            server = ServerThread(create_app(backend, f"tiny-{name}"))
            v1 = server.__enter__()
            servers.append((server, backend))
            out[name] = {"server": v1, "root": v1.removesuffix("/v1")}
        launched = {name: launch_meter(out[name]["root"], root / f"meter-{name}.log") for name in ("a", "b")}
        procs += [proc for proc, _, _ in launched.values()]
        for name, (proc, url, args) in launched.items():  # both exporters start at once
            wait_ready(proc, args, url, root / f"meter-{name}.log")
            out[name]["exporter"] = url
        yield out
    finally:
        for proc in procs:
            stop(proc)
        for server, backend in servers:
            server.__exit__()
            backend.close()
