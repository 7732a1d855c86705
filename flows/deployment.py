"""The scheduled deployment: a cron schedule with a timezone, one run at a time, served in the background.

``deploy`` registers the deployment (so it is in the server and the UI when the
command returns), then starts a detached ``serve`` process that runs its flow
runs; ``stop`` ends that process. Prefect pauses a served deployment's schedule
when its serve process stops (``pause_on_shutdown``): no run fires while nothing
would execute it; ``deploy`` again resumes it.

Two runs of the deployment never run the pipeline at once: the deployment has a
concurrency limit of 1 (a second run waits in ``AwaitingConcurrencySlot``), and
the flow takes a repository lock (``flows.lock``) against ad-hoc runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

FLOW_NAMES = {"pipeline": "jouleroute-pipeline", "replay_study": "jouleroute-replay-study", "loop": "jouleroute-loop"}


class ServerUnavailable(RuntimeError):
    pass


def api_url(explicit: str | None = None) -> str:
    """The Prefect API to register with: --api-url, else PREFECT_API_URL (env or profile). Never ephemeral."""
    if explicit:
        return explicit.rstrip("/")
    from prefect.settings import PREFECT_API_URL

    url = os.environ.get("PREFECT_API_URL") or PREFECT_API_URL.value()
    if not url:
        raise ServerUnavailable(
            "no Prefect server configured. A schedule needs a running server: start one with "
            "`jouleroute-flow server start` (or `make prefect-server`), then "
            "`export PREFECT_API_URL=http://127.0.0.1:4200/api`")
    return url.rstrip("/")


def check_server(url: str, timeout_s: float = 5.0) -> None:
    try:
        response = httpx.get(f"{url}/health", timeout=timeout_s)
        response.raise_for_status()
    except httpx.HTTPError as error:
        raise ServerUnavailable(
            f"no Prefect server answers at {url} ({type(error).__name__}: {error}). Start one with "
            "`jouleroute-flow server start` (or `make prefect-server`), or fix PREFECT_API_URL") from None


def build(flow_attr: str, name: str, cron: str, timezone: str, parameters: dict):
    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.deployments.runner import EntrypointType
    from prefect.schedules import Cron

    import flows.loop
    import flows.pipeline

    the_flow = getattr(flows.loop if flow_attr == "loop" else flows.pipeline, flow_attr)
    what = ("the loop: captured traffic -> its pipeline through DVC -> the gated promotion" if flow_attr == "loop"
            else "jouleroute through DVC")
    return the_flow.to_deployment(
        name=name, schedules=[Cron(cron, timezone=timezone)], parameters=parameters, tags=["jouleroute"],
        concurrency_limit=ConcurrencyLimitConfig(limit=1, collision_strategy=ConcurrencyLimitStrategy.ENQUEUE),
        description=f"{what}, {cron} ({timezone}); nothing changed = nothing recomputed",
        entrypoint_type=EntrypointType.MODULE_PATH,  # importable from any working directory
    )


def serve_foreground(flow_attr: str, name: str, cron: str, timezone: str, parameters: dict) -> None:
    """Blocks: executes the deployment's runs until interrupted (which pauses its schedule)."""
    from prefect import serve

    serve(build(flow_attr, name, cron, timezone, parameters), pause_on_shutdown=True)


def runtime_dir(root: Path) -> Path:
    path = root / "artifacts" / "prefect"
    path.mkdir(parents=True, exist_ok=True)
    return path


def serve_background(argv: list[str], root: Path, url: str, full_name: str, timeout_s: float = 180.0) -> dict:
    """Start ``jouleroute-flow ... deploy --foreground`` detached; return once the deployment is served."""
    files = runtime_dir(root)
    stem = full_name.split("/")[-1]
    stop(root, stem, quiet=True)  # one serve process per deployment name
    log = open(files / f"serve-{stem}.log", "ab")
    env = {**os.environ, "PREFECT_API_URL": url}
    proc = subprocess.Popen([sys.executable, "-m", "flows", *argv, "--foreground"], cwd=root, env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    (files / f"serve-{stem}.pid").write_text(f"{proc.pid}\n")
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            tail = (files / f"serve-{stem}.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the serve process exited ({proc.returncode}):\n{tail}")
        deployment = read_deployment(url, full_name)
        if deployment and not deployment.get("paused") and _serving(url, deployment):
            return {"pid": proc.pid, "log": str(files / f"serve-{stem}.log"), "deployment": deployment}
        time.sleep(1.0)
    raise RuntimeError(f"the deployment {full_name} did not come up within {timeout_s:.0f} s; "
                       f"see {files / f'serve-{stem}.log'}")


def _serving(url: str, deployment: dict) -> bool:
    """The serve process has polled for this deployment's runs (so a triggered run will execute)."""
    return bool(deployment.get("last_polled")) or deployment.get("status") == "READY"


def read_deployment(url: str, full_name: str) -> dict | None:
    flow_name, name = full_name.split("/")
    response = httpx.get(f"{url}/deployments/name/{flow_name}/{name}", timeout=10)
    return response.json() if response.status_code == 200 else None


def stop(root: Path, stem: str, quiet: bool = False) -> bool:
    """Stop the background serve process of a deployment (its schedule is then paused)."""
    pid_file = runtime_dir(root) / f"serve-{stem}.pid"
    if not pid_file.exists():
        if not quiet:
            print(f"no background serve process for {stem} (no {pid_file})")
        return False
    pid = int(pid_file.read_text().strip())
    try:
        os.kill(pid, signal.SIGTERM)  # the runner shuts down gracefully: cancels a run in flight, pauses
        for _ in range(150):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.killpg(pid, signal.SIGKILL)  # its own session: the runner and any flow-run subprocess
    except ProcessLookupError:
        pass
    pid_file.unlink(missing_ok=True)
    if not quiet:
        print(f"stopped serving {stem} (pid {pid}); its schedule is paused until the next deploy")
    return True
