"""Command line: ``jouleroute <stage>`` (or ``python -m jouleroute <stage>``).

DVC's stage commands, the Prefect flow and the tests call the same stage
functions this CLI calls; the CLI only adds logging and progress bars.
"""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from typing import Callable

from jouleroute.offline import set_offline_defaults

EPILOG = textwrap.dedent("""\
    The stages run in this order under `dvc repro` (see dvc.yaml):
      prepare -> models -> tournament -> validate -> router_data -> sft -> grpo -> evaluate
    Every stage reads params.yaml (or --params FILE); unknown keys are errors.
    Results: `jouleroute where`. UIs: `make ui-mlflow`, `make ui-prefect`.
""")


def _tqdm_progress(total: int, label: str) -> Callable[[int], None]:
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=label, unit="q", dynamic_ncols=True, leave=True)

    def tick(n: int) -> None:
        bar.update(n)
        if bar.n >= bar.total:
            bar.close()

    return tick


def build_parser() -> argparse.ArgumentParser:
    from jouleroute.stages import STAGES, UTILITIES

    parser = argparse.ArgumentParser(
        prog="jouleroute",
        description="Learn to route LLM queries to the cheapest model that still answers correctly, "
                    "and measure the energy that saves.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (logs only)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, summary, details) in {**STAGES, **UTILITIES}.items():
        sp = sub.add_parser(name, help=summary, description=f"{summary}\n\n{details}",
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(command=name)
        if name == "flow":
            sp.add_argument("--cron", help="serve the flow on this cron schedule (needs `prefect server start`)")
            sp.add_argument("--stages", nargs="*", help="run only these stages, in pipeline order")
    return parser


def main(argv: list[str] | None = None) -> int:
    set_offline_defaults()
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    from jouleroute.config import ParamsError
    from jouleroute.stages import STAGES, UTILITIES, StageFailed
    from jouleroute.stages.context import StageContext

    try:
        ctx = StageContext.load(args.params, progress=None if args.no_progress else _tqdm_progress)
        fn = {**STAGES, **UTILITIES}[args.command][0]
        fn(ctx, args) if args.command in UTILITIES else fn(ctx)
    except (ParamsError, StageFailed) as exc:
        print(f"jouleroute {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
