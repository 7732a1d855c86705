"""`jouleroute-flow`: the pipeline through Prefect: run it now, schedule it, run the tournament on Dask.

A separate command from `jouleroute` so the library never imports Prefect
(`jouleroute flow ...` forwards here).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

EPILOG = textwrap.dedent("""\
    Scheduled reruns (README "Scheduled reruns"):
      jouleroute-flow server start                       # Prefect server + UI in the background, :4200
      export PREFECT_API_URL=http://127.0.0.1:4200/api
      jouleroute-flow deploy --cron "0 3 * * *" --timezone Europe/Berlin
      jouleroute-flow stop                               # stop serving (pauses the schedule)
    The tournament on a 2-worker Dask cluster:
      jouleroute-flow run --stages prepare models tournament --dask-workers 2
    The loop from serving back to learning (docs/loop.md):
      jouleroute-flow loop --init loops/mine --capture artifacts/capture --labels reference:gemma3-loglik
      jouleroute-flow --params loops/mine/params.yaml loop              # one iteration, now
      jouleroute-flow --params loops/mine/params.yaml deploy --flow loop --cron "0 * * * *"
""")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jouleroute-flow", description=__doc__.split("\n\n")[0], epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml", help="params file; studies/replay/params.yaml runs "
                        "the replay study's flow (default: params.yaml)")
    parser.add_argument("--root", default=".", help="repository root, where dvc.yaml is (default: .)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the pipeline once, now; blocks until it ends",
                         description="Run the stages once as a Prefect flow (one task run per stage, through "
                                     "`dvc repro --single-item`). Without PREFECT_API_URL, Prefect uses a "
                                     "temporary local server.")
    run.add_argument("--stages", nargs="+", metavar="STAGE", help="only these stages, in pipeline order")
    run.add_argument("--dask-workers", type=int, default=0, metavar="N",
                     help="run the tournament's shards on a LocalCluster of N worker processes x 1 thread")
    run.add_argument("--dask-address", metavar="ADDR",
                     help="run the tournament's shards on this Dask scheduler (tcp://host:8786); "
                          "default: params' tournament.dask_address")

    loop = sub.add_parser(
        "loop", help="one iteration of the loop: fold the captured traffic, rerun the loop's pipeline, promote "
                     "the new policy only if the gate says so",
        description="One iteration of the loop whose pipeline is --params (a loop workspace's params.yaml): the "
                    "gateway's new capture folded into the loop's prompts and feedback, the loop's stages through "
                    "DVC (the tournament for the new queries only), then the gate on the newest held-out traffic: "
                    "the candidate is promoted (the served version swapped atomically; a gateway started with the "
                    "loop's serve.yaml reloads) only if non-inferior in accuracy and not dearer in joules. The "
                    "decision is an MLflow run and a line of the loop's report.md (docs/loop.md).")
    loop.add_argument("--init", metavar="DIR", help="create a loop workspace in DIR from params.yaml and dvc.yaml "
                      "(its first served version: the main pipeline's deployed policy), then exit")
    loop.add_argument("--capture", metavar="FOLDER", help="with --init: the gateway's capture folder it folds")
    loop.add_argument("--labels", default="vote", metavar="SOURCE",
                      help="with --init: vote, or reference:<candidate> (default: vote)")
    loop.add_argument("--task", default="user", help="with --init: the task of a request that names none")
    loop.add_argument("--rollback", action="store_true", help="serve the version served before this one, then exit")

    deploy = sub.add_parser(
        "deploy", help="register the scheduled deployment and serve it in the background",
        description="Register the pipeline as a Prefect deployment with a cron schedule and a timezone, then "
                    "start a background process that executes its runs (pid and log in artifacts/prefect/), "
                    "and return. Needs a running Prefect server (PREFECT_API_URL or --api-url); refused "
                    "up front without one. One run at a time: a run due while another is running waits "
                    "for it. `jouleroute-flow stop` ends serving, which pauses the schedule. With "
                    "--foreground it serves in this process instead and BLOCKS until interrupted.")
    deploy.add_argument("--flow", choices=["pipeline", "loop"], default="pipeline",
                        help="what the schedule runs: the pipeline of --params (default), or the loop whose "
                             "workspace --params names (docs/loop.md)")
    deploy.add_argument("--cron", required=True, help='cron schedule, e.g. "0 3 * * *" (03:00 every day)')
    deploy.add_argument("--timezone", default="UTC", help="IANA timezone of the schedule (default: UTC)")
    deploy.add_argument("--name", default="jouleroute-scheduled", help="deployment name")
    deploy.add_argument("--stages", nargs="+", metavar="STAGE", help="only these stages, in pipeline order")
    deploy.add_argument("--api-url", help="Prefect API (default: PREFECT_API_URL)")
    deploy.add_argument("--foreground", action="store_true", help="serve in this process; blocks")

    stop = sub.add_parser("stop", help="stop serving the deployment (pauses its schedule)")
    stop.add_argument("--name", default="jouleroute-scheduled")

    server = sub.add_parser("server", help="start or stop a local Prefect server (UI) in the background")
    server.add_argument("action", choices=["start", "stop"])
    server.add_argument("--port", type=int, default=4200)
    return parser


def fail(message: str) -> int:
    print(f"jouleroute-flow: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    from jouleroute.offline import set_offline_defaults

    set_offline_defaults()
    root = Path(args.root).resolve()
    if args.command == "server":
        return server(args.action, args.port)
    if args.command == "stop":
        from flows.deployment import stop

        return 0 if stop(root, args.name) else 1  # a typo in the name stopped nothing: not a success

    from flows.stages import UnknownStage, choose, dvc_yaml_for, stage_order
    from jouleroute.config import ParamsError

    params = Path(args.params) if Path(args.params).is_absolute() else root / args.params
    if args.command == "loop" or (args.command == "deploy" and args.flow == "loop"):
        return loop_command(args, argv, root, params)
    from jouleroute.stages.table import is_own_params

    if not is_own_params(params, root):  # as `jouleroute repro`: a copy drives no dvc.yaml, its stages read params.yaml
        return fail(f"{params.name} is a params copy, and the flows run a dvc.yaml's stages, which read that "
                    "pipeline's params.yaml: run its stages one by one (`jouleroute --params FILE prepare`, ...), or "
                    "give it a pipeline of its own, a folder with params.yaml and dvc.yaml (docs/your-own-pool.md)")
    try:  # everything checked before anything starts: params, stage names
        from flows.pipeline import flow_for

        the_flow = flow_for(params)
        dvc_yaml = dvc_yaml_for(params, root)
        choose(stage_order(dvc_yaml), args.stages, dvc_yaml)
    except (ParamsError, UnknownStage, FileNotFoundError) as error:
        return fail(str(error))
    flow_args = {"params_path": str(params), "root": str(root), "stages": args.stages}
    if args.command == "run":
        if the_flow.name == "jouleroute-pipeline":
            flow_args |= {"dask_address": args.dask_address, "dask_workers": args.dask_workers}
        elif args.dask_address or args.dask_workers:
            return fail("--dask-* applies to the tournament, which the replay study does not run")
        state = the_flow(**flow_args, return_state=True)
        print(f"{the_flow.name}: {state.name}: {state.message}")
        return 0 if state.is_completed() else 1
    return deploy(args, argv, root, the_flow, flow_args)


def deploy(args, argv, root: Path, the_flow, flow_args: dict) -> int:
    from flows.deployment import FLOW_NAMES, ServerUnavailable, api_url, check_server, serve_background, \
        serve_foreground

    try:
        ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        return fail(f"unknown timezone {args.timezone!r}: use an IANA name such as UTC or Europe/Berlin")
    try:
        from prefect.schedules import Cron

        Cron(args.cron, timezone=args.timezone)
    except ValueError as error:
        return fail(f"invalid cron {args.cron!r}: {error}")
    try:
        url = api_url(args.api_url)
        check_server(url)
    except ServerUnavailable as error:
        return fail(str(error))
    flow_attr = next(k for k, v in FLOW_NAMES.items() if v == the_flow.name)
    if args.foreground:
        os.environ["PREFECT_API_URL"] = url
        serve_foreground(flow_attr, args.name, args.cron, args.timezone, flow_args)
        return 0
    child_argv = [a for a in argv if a != "--foreground"]
    child_argv = ["--params", flow_args["params_path"], "--root", str(root),
                  *child_argv[child_argv.index("deploy"):]]
    try:
        served = serve_background(child_argv, root, url, f"{the_flow.name}/{args.name}")
    except RuntimeError as error:
        return fail(str(error))
    dep = served["deployment"]
    ui = url.removesuffix("/api")
    print(textwrap.dedent(f"""\
        deployment {the_flow.name}/{args.name}: cron "{args.cron}" ({args.timezone}), one run at a time
          served in the background by pid {served['pid']} (log: {served['log']})
          UI: {ui}/deployments/deployment/{dep['id']}
          run now: prefect deployment run '{the_flow.name}/{args.name}'
          stop serving (pauses the schedule): jouleroute-flow stop --name {args.name}"""))
    return 0


def loop_command(args, argv, root: Path, params: Path) -> int:
    """`loop` (init, rollback, one iteration) and `deploy --flow loop`: the loop's workspace is --params' folder."""
    from jouleroute.config import ParamsError, load_params
    from jouleroute.loop.workspace import LoopError, Workspace

    try:
        if args.command == "loop" and args.init:
            return loop_init(args, root)
        ws = Workspace.of(params, root)
        ws.config()  # everything checked before anything starts: the loop's settings and params
        load_params(ws.params_file)
        if args.command == "deploy" and args.stages:
            return fail("--stages applies to the pipeline; the loop runs its own pipeline's stages, all of them")
        if args.command == "loop" and args.rollback:
            from jouleroute.loop.serving import policy_version, rollback

            served = rollback(ws.serving)
            print(f"serving {policy_version(served)} again ({ws.show(served)})")
            return 0
    except (LoopError, ParamsError, RuntimeError) as error:
        return fail(str(error))
    from flows.loop import loop

    flow_args = {"params_path": str(ws.params_file), "root": str(root)}
    if args.command == "deploy":
        if args.name == "jouleroute-scheduled":  # the pipeline's default: one serve process per name
            args.name = f"loop-{ws.name}"
            argv = [*argv, "--name", args.name]
        return deploy(args, argv, root, loop, flow_args)
    state = loop(**flow_args, return_state=True)
    print(f"{loop.name}: {state.name}: {state.message}")
    return 0 if state.is_completed() else 1


def loop_init(args, root: Path) -> int:
    from jouleroute.config import load_params
    from jouleroute.loop.init import adopt, init_loop
    from jouleroute.loop.workspace import Workspace

    if not args.capture:
        return fail("loop --init needs --capture FOLDER: the gateway's capture folder (gateway.capture.folder)")
    folder = Path(args.init) if Path(args.init).is_absolute() else root / args.init
    ws = Workspace(root, folder.resolve())
    written = init_loop(ws, args.capture, args.labels, args.task)
    load_params(ws.params_file), load_params(ws.serve_params)  # what was written is a valid params file
    main = load_params(root / "params.yaml")
    adopted = adopt(ws, main.paths.resolve("evaluate_dir", root) / "champion", main.paths.resolve("queries", root),
                    main.paths.resolve("labelled_profile", root))
    print("\n".join(f"wrote {ws.show(p)}" for p in written))
    print(f"serving first: {ws.show(adopted) if adopted else 'nothing yet (the first iteration promotes its policy)'}")
    print(textwrap.dedent(f"""\
        next:
          jouleroute --params {ws.rel}/serve.yaml serve          # captures into {args.capture}, reloads on promotion
          jouleroute-flow --params {ws.rel}/params.yaml loop     # one iteration, once traffic is captured"""))
    return 0


def server(action: str, port: int) -> int:
    import httpx

    prefect = str(Path(sys.executable).parent / "prefect")
    if action == "stop":
        return subprocess.run([prefect, "server", "stop"]).returncode
    from jouleroute.commands.ports import record

    record(Path.cwd(), "prefect", port)  # `jouleroute where` prints this port
    url = f"http://127.0.0.1:{port}/api"
    # the UI's browser code calls this URL; left unset it would be :4200 whatever --port says
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_UI_API_URL": url}
    started = subprocess.run([prefect, "server", "start", "--background", "--host", "127.0.0.1", "--port",
                              str(port)], env=env, capture_output=True, text=True)
    if started.returncode != 0:
        return fail(f"prefect server start failed:\n{started.stdout[-2000:]}{started.stderr[-2000:]}")
    for _ in range(240):
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                print(f"Prefect server running in the background: UI http://127.0.0.1:{port}\n"
                      f"  export PREFECT_API_URL={url}\n  stop it: jouleroute-flow server stop")
                return 0
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return fail(f"the server did not answer at {url} within 120 s")
