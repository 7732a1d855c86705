"""`jouleroute flow ARGS`: forwards to `jouleroute-flow ARGS` (flows/cli.py) in a child process.

Prefect lives in the top-level `flows/` and `tasks/` packages; the library never
imports them, so this command only starts `python -m flows`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from jouleroute.stages.context import StageContext


def flow_command(ctx: StageContext, args: argparse.Namespace) -> int:
    rest = args.flow_args[1:] if args.flow_args[:1] == ["--"] else args.flow_args
    cmd = [sys.executable, "-m", "flows", "--params", str(ctx.params_path), "--root", str(ctx.root), *rest]
    return subprocess.run(cmd).returncode
