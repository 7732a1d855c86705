"""Command line: ``jouleroute <stage>`` (or ``python -m jouleroute <stage>``).

DVC's stage commands, the Prefect flow and the tests call the same stage
functions this CLI calls; the CLI only adds logging and progress bars.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
from pathlib import Path
from typing import Callable

from jouleroute.offline import set_offline_defaults

def epilog() -> str:
    from jouleroute.stages.table import stage_order

    return textwrap.dedent("""\
        The stages run in this order under `dvc repro` (see dvc.yaml):
          {order}
        Every stage reads params.yaml (or --params FILE); unknown keys are errors.
        Results: `jouleroute where`. UIs: `make ui-mlflow`, `make ui-prefect`.
    """).format(order=" -> ".join(stage_order()))


def _progress_unit(label: str) -> str:
    """What one tick counts: training steps, router families (the baselines), else queries."""
    if label.endswith("steps"):
        return "step"
    if label.startswith("data"):
        return "dataset"
    return "family" if label.startswith("baselines") else "q"


def _tqdm_progress(total: int, label: str) -> Callable[[int], None]:
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=label, unit=_progress_unit(label), dynamic_ncols=True, leave=True)

    def tick(n: int) -> None:
        bar.update(n)
        if bar.n >= bar.total:
            bar.close()

    return tick


def _common_options(parser: argparse.ArgumentParser, on_command: bool = False) -> None:
    """--params, -v, --debug, --no-progress: accepted before or after the command name. The copies on a
    command default to SUPPRESS, so they never reset an option given before the command."""
    default = (lambda value: argparse.SUPPRESS) if on_command else (lambda value: value)
    parser.add_argument("--params", default=default("params.yaml"), help="params file (default: params.yaml)")
    parser.add_argument("-v", "--verbose", action="store_true", default=default(False), help="debug logging")
    parser.add_argument("--debug", action="store_true", default=default(False),
                        help="show the full traceback of an error")
    parser.add_argument("--no-progress", action="store_true", default=default(False),
                        help="no progress bars (logs only)")


OWN_FLAGS = ("-v", "--verbose", "--debug", "--no-progress")


def split_forwarded(argv: list[str]) -> tuple[list[str], list[str]]:
    """``repro``'s own options (``--params FILE``, ``-v``, ``--debug``, ``--no-progress``, wherever they
    stand) and the arguments for `dvc repro` (``-f``, ``-s``, targets; a ``--`` is dropped). argparse alone
    cannot forward ``repro -f evaluate``: it reads ``-f`` as an unknown option of its own."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # options before the command
        i += 2 if argv[i] == "--params" else 1
    if i >= len(argv) or argv[i] != "repro":
        return argv, []
    own, forwarded = argv[:i + 1], []
    rest = iter(argv[i + 1:])
    for arg in rest:
        if arg in OWN_FLAGS or arg.startswith("--params=") or arg in ("-h", "--help"):
            own.append(arg)
        elif arg == "--params":
            own += [arg, next(rest, "")]
        elif arg != "--":
            forwarded.append(arg)
    return own, forwarded


def build_parser() -> argparse.ArgumentParser:
    from jouleroute.commands import COMMANDS
    from jouleroute.stages import STAGES

    parser = argparse.ArgumentParser(
        prog="jouleroute",
        description="Learn to route LLM queries to the cheapest model that still answers correctly, "
                    "and measure the energy that saves.",
        epilog=epilog(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, summary, details) in {**STAGES, **COMMANDS}.items():
        sp = sub.add_parser(name, help=summary, description=f"{summary}\n\n{details}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(command=name)
        _common_options(sp, on_command=True)
        if name == "repro":
            sp.add_argument("dvc_args", nargs="*", metavar="DVC_ARGS",
                            help="passed to `dvc repro` (targets, -f, -s, --dry, ...)")
        if name == "serve":
            sp.add_argument("--host", help="address to bind (default: gateway.host, 127.0.0.1)")
            sp.add_argument("--port", type=int, help="port (default: gateway.port, 8080)")
            sp.add_argument("--config", help="YAML file with the gateway section (default: params' gateway)")
            target = sp.add_mutually_exclusive_group()
            target.add_argument("--target-energy-share", type=float, metavar="SHARE",
                                help="serve the champion at the λ that val chose to spend at most SHARE of the best "
                                     "single model's energy (e.g. 0.5; sets router.target.energy_share)")
            target.add_argument("--target-accuracy", type=float, metavar="ACC",
                                help="serve the champion at the cheapest λ that reached accuracy ACC on val "
                                     "(sets router.target.accuracy_floor)")
        if name == "import":
            sp.add_argument("--init", metavar="DIR", help="write DIR/params.yaml and DIR/dvc.yaml: a pipeline of its "
                            "own for your table (import -> ... -> evaluate); docs/your-own-pool.md")
            sp.add_argument("--table", metavar="FILE", help="with --init: your outcome table (repository-relative)")
            sp.add_argument("--prompts", metavar="FILE", help="with --init: your prompts without gold answers (a "
                            "chat-completions JSONL or a parquet with a prompt column): a pipeline that runs your "
                            "pool on them and labels the answers by a vote (prepare -> tournament -> labels -> ...)")
            sp.add_argument("--reference", metavar="CANDIDATE", help="with --prompts: label answers by agreement "
                            "with this candidate's, not by a vote")
        if name == "flow":
            sp.add_argument("flow_args", nargs=argparse.REMAINDER, help="passed to `jouleroute-flow`")
        if name == "data":
            from jouleroute.commands.data import add_arguments

            add_arguments(sp)
        if name == "exp":
            sp.add_argument("exp_args", nargs=argparse.REMAINDER, help="ACTION and its arguments (see above)")
        if name in ("serve-model", "meter"):
            from jouleroute.commands.serving import add_arguments

            add_arguments(name, sp)
    return parser


def parse_intermixed(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed with a command's NAMEs before or after its options: `data fetch --offline NAME` as
    `data fetch NAME --offline`. argparse fills a ``nargs="*"`` positional at its first chance (empty, before
    ``--offline``) and leaves the NAMEs after the option over; those are the command's names, anything else is an
    error as parse_args would say it. (parse_intermixed_args refuses a parser with subcommands.)"""
    args, left_over = parser.parse_known_args(argv)
    if not left_over:
        return args
    if isinstance(getattr(args, "names", None), list) and not any(a.startswith("-") for a in left_over):
        args.names += left_over
        return args
    parser.error(f"unrecognized arguments: {' '.join(left_over)}")


def project_root_above(here: Path) -> Path | None:
    """The DVC project (a folder holding ``.dvc/``) that ``here`` lies strictly inside, or None (``here`` is a
    project root, or no project holds it)."""
    here = here.resolve()
    if (here / ".dvc").is_dir():
        return None
    return next((up for up in here.parents if (up / ".dvc").is_dir()), None)


def main(argv: list[str] | None = None) -> int:
    set_offline_defaults()
    own, forwarded = split_forwarded(list(sys.argv[1:] if argv is None else argv))
    args = parse_intermixed(build_parser(), own)
    if forwarded:
        args.dvc_args = forwarded
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    if not args.verbose:
        quiet_libraries()
    from jouleroute.commands import COMMANDS, PARAMS_OPTIONAL, PARAMS_UNREAD
    from jouleroute.stages import STAGES
    from jouleroute.commands.errors import expected_error

    ctx = None
    try:
        if args.command not in PARAMS_UNREAD and (args.command not in PARAMS_OPTIONAL or os.path.exists(args.params)):
            from jouleroute.stages.context import StageContext  # (not for `meter` on a bare GPU node)

            root = project_root_above(Path.cwd())
            if root is not None:  # every params file's `paths:` are relative to the project root, not to here
                print(f"jouleroute {args.command}: run it from the project root, {root} (`cd {root}`): the paths "
                      "in params files are relative to it, not to this subdirectory", file=sys.stderr)
                return 1

            ctx = StageContext.load(args.params, progress=None if args.no_progress else _tqdm_progress)
        fn = {**STAGES, **COMMANDS}[args.command].run
        if args.command in COMMANDS:
            status = fn(ctx, args)
            return status if isinstance(status, int) else 0
        ctx.require_inputs(args.command)
        ctx.check_outputs(args.command)
        fn(ctx)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"jouleroute {args.command}: interrupted; rerun to continue (the tournament resumes from its "
              "shards, training from its last checkpoint)", file=sys.stderr)
        return 130
    except Exception as exc:
        message = expected_error(exc, ctx)
        if message is None or args.debug:
            raise
        print(f"jouleroute {args.command}: {message}", file=sys.stderr)
        return 1
    return 0


NOISY_LOGGERS = ("great_expectations", "mlflow", "alembic", "urllib3", "httpx", "matplotlib", "filelock",
                 "transformers", "datasets", "trl", "numexpr")


def quiet_libraries() -> None:
    """Libraries speak at WARNING (GE alone logs ~200 INFO lines per validation); ``-v`` lets them talk."""
    import warnings

    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    # MLflow sets its own loggers' level when it is imported (after this): it reads the level from here
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    # MLflow's pyfunc type-hint advice is for model authors, not for someone running the pipeline;
    # transformers' deprecation notices are about calls inside TRL, which a user cannot act on
    warnings.filterwarnings("ignore", module=r"mlflow\..*")
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\..*")
    # sub-second bars (loading a small model's weights, saving shards) would bury ours; read at HF import
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


if __name__ == "__main__":
    sys.exit(main())
