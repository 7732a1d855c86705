"""Commands that are not pipeline stages: they produce no DVC output, or forward to a tool.

``run(ctx, args)`` like a stage's, plus the parsed command line.
"""

from __future__ import annotations

from jouleroute.stages import Command, lazy


def _here(module: str, func: str):
    return lazy(f"jouleroute.commands.{module}", func)


COMMANDS: dict[str, Command] = {
    "import": Command(_here("import_outcomes", "import_command"),
               "Import your own outcome table (CSV/JSONL/parquet) as a profile.",
               "See docs/replay.md for the minimal schema. Bad input names the file, row and field.\n"
               "`--init DIR --table FILE` writes DIR/params.yaml and DIR/dvc.yaml, a pipeline of its own for the\n"
               "table (`dvc repro DIR/dvc.yaml`; docs/your-own-pool.md)."),
    "where": Command(_here("where", "where_command"), "Print where the results are and how to open the UIs.", ""),
    "check-params": Command(_here("repro", "check_params_command"), "Validate the whole params file and exit.",
                     "Unknown sections and keys are errors (with a 'did you mean'); nothing is run or deleted."),
    "repro": Command(_here("repro", "repro_command"), "`dvc repro [ARGS]` after validating the params file.",
              "`dvc repro` deletes a stage's outputs before running it; this checks the whole params file first,\n"
              "so a typo costs nothing. `make run` calls it. Extra arguments go to dvc repro."),
    "exp": Command(_here("exp", "exp_command"), "DVC experiments on this pipeline: save, run -S, show, apply.",
            "`save NAME` keeps your run; `run -S key=value` checks each override before DVC rewrites params.yaml;\n"
            "`show` compares (only what changed); `apply NAME` goes back or forward, checking out this pipeline's\n"
            "outputs only. Other actions go to `dvc exp`. README \"Experiments\" has the round trip."),
    "serve": Command(_here("serve", "serve_command"), "Serve the router: an energy-aware OpenAI-compatible gateway.",
              "`model: jouleroute-auto` is routed at the energy weight of the X-Energy-Weight header; every\n"
              "answer states its candidate and energy. Default: the pool in-process behind the trained router\n"
              "(after `make run`). Configure upstreams, keys and limits in `gateway:` (docs/gateway.md)."),
    "flow": Command(_here("flow", "flow_command"), "Same as `jouleroute-flow ARGS`: Prefect runs, schedules, Dask.",
             "Forwards to `jouleroute-flow` (flows/cli.py; the library never imports Prefect), e.g.\n"
             "`jouleroute flow run`, `jouleroute flow deploy --cron \"0 3 * * *\" --timezone UTC`.\n"
             "See `jouleroute-flow --help` and docs/orchestration.md."),
}
