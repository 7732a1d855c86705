"""Stage `budget`: the budget curve, router utility (val and test) against the joules spent profiling its data.

(a) SFT on a full tournament of fractions of each task's train queries (1.0: the pipeline's own SFT checkpoint
when it fitted every train query); (b) that SFT, then GRPO with partial feedback on the rest, from the params'
grpo.reward_source (`live` runs the sampled pairs neither the tournament's shard store nor the live-pair cache
holds, anything else replays
the profile). Writes budget.json and budget.png to paths.budget_dir; the reports show them.
"""

from __future__ import annotations

import json
import logging
import shutil
from functools import partial
from pathlib import Path

import pandas as pd

from jouleroute.stages.context import StageContext
from jouleroute.stages.router_training import grpo_run

logger = logging.getLogger(__name__)


def budget_stage(ctx: StageContext) -> dict:
    from jouleroute.stages.router_training import base_model_dir
    from jouleroute.labels.scoring import scoring_profile
    from jouleroute.training.budget import BudgetInputs, outcome_rows, run_budget
    from jouleroute.training.router_data import UNPROFILED

    data_dir, out_dir = ctx.path("router_data_dir"), ctx.path("budget_dir")
    spec = json.loads((data_dir / "router_spec.json").read_text())
    column = json.loads((data_dir / "stats.json").read_text()).get("energy_column")
    if not column:
        raise ValueError(f"{data_dir / 'stats.json'}: field 'energy_column' is missing: rerun router_data")
    # the split's outcomes in the column and norm the labels used (router_data's stats.json, router_spec.json)
    # scored as evaluate scores: test on gold where the queries carry it (labels/scoring.py)
    scored, _ = scoring_profile(pd.read_parquet(ctx.path("labelled_profile")), pd.read_parquet(ctx.path("profile")))
    test = outcome_rows(scored, pd.read_parquet(ctx.path("queries")), column, spec["lambdas"], spec["candidates"])
    if out_dir.exists():
        shutil.rmtree(out_dir)  # never a stale point: every router here is trained by this run
    inputs = BudgetInputs(data_dir=data_dir, base_model_dir=base_model_dir(ctx), sft_dir=ctx.path("sft_dir"),
                          test=test, out_dir=out_dir, cache_dir=ctx.path("trunk_cache"),
                          prior_strength=ctx.params.router_data.prior_strength)
    live, completed = None, None
    if ctx.params.grpo.reward_source == "live":  # rollouts run on the tournament's backend, into the live-pair cache
        from jouleroute.stages.tournament_inputs import tournament_inputs
        from jouleroute.tournament.live import LiveOutcomes

        live = partial(LiveOutcomes, tournament_inputs(ctx))
        if (data_dir / UNPROFILED).is_file():  # the tournament ran SFT's share only: (a) at 1 needs the rest
            inputs.data_dir, completed = complete_train_tournament(ctx, live, column, out_dir / "router_data")
    with ctx.stage_run("budget",
                       energy_source=spec.get("energy_source")) as run:
        result = run_budget(ctx.params.budget, ctx.params.sft, ctx.params.grpo, ctx.params.router, inputs,
                            live=live, completed=completed)
        if run is not None:
            _log(ctx, run, result)
    return result


def complete_train_tournament(ctx: StageContext, live, column: str, out: Path) -> tuple[Path, dict]:
    """Every pair of the train queries the tournament left to GRPO (router_data's unprofiled.jsonl), read from
    the tournament's shard store or the live-pair cache, or run now into the cache (never twice: GRPO's
    rollouts are reused), then router_data
    again on the completed profile into ``out``: the data of the curve's (a) points. Their joules are the
    curve's, billed in budget.json, not the deployed router's."""
    from jouleroute.training.router_data import UNPROFILED, run_router_data
    from jouleroute.training.sft import read_jsonl

    data_dir = ctx.path("router_data_dir")
    ids = [str(r["query_id"]) for r in read_jsonl(data_dir / UNPROFILED)]
    pairs = [(q, c) for q in ids for c in ctx.params.candidate_ids]
    outcomes = live(energy_column=column, query_ids=ids, run_id=None)
    try:
        outcomes.reveal_all(pairs)
        rows = outcomes.stored_rows(pairs)
        executed = set(outcomes.executed)
    finally:
        outcomes.close()
    profile = pd.read_parquet(ctx.path("labelled_profile"))
    rows = rows.assign(label_source="gold")  # live rollouts grade on gold (params refuse them with other labels)
    full = pd.concat([profile, rows[list(profile.columns)]], ignore_index=True)
    run_router_data(full, pd.read_parquet(ctx.path("queries")), ctx.params.router_data, out, ctx.params.energy_policy)
    spent = rows[[(q, c) in executed for q, c in zip(rows["query_id"], rows["candidate_id"])]]
    logger.info("budget: the train tournament completed with %d pairs of %d queries (%d run now, the rest stored by "
                "GRPO or an earlier run)", len(pairs), len(ids), len(executed))
    return out, {"queries": len(ids), "pairs": len(pairs), "executed_pairs": len(executed),
                 "executed_j": float(spent[column].sum()),
                 "by_source": {str(s): float(j) for s, j in spent.groupby("energy_source")[column].sum().items()}}


def _log(ctx: StageContext, run, result: dict) -> None:
    """The curve's figures, its plot and its JSON into the stage's run; the plot also into the grpo run it extends."""
    out_dir = ctx.path("budget_dir")
    for point in result["points"]:
        name = point["name"].replace("+", "_").replace("@", "_f")  # MLflow names: sft_f0.5, sft_grpo_f0.5
        run.log_metrics({f"{name}.{key}": point[key] for key in (
            "profiling_j", "profiling_pairs", "share_of_full_train_tournament", "val_utility", "test_utility",
            "val_minus_full_sft", "test_minus_full_sft") if point.get(key) is not None})
    run.log_metrics({"full_train_tournament_j": result["full_train_tournament"]["joules"]})
    run.log_artifact(out_dir / "budget.png", "plots")
    run.log_dict(result, "budget.json")
    run.set_tags({"profiling_energy_source": result["energy_source"], "reward_source": result["reward_source"]})
    grpo = grpo_run(ctx).get("run_id")
    if grpo is not None:
        run.set_tags({"extends_grpo_run": grpo})
        run.client.log_artifact(grpo, str(out_dir / "budget.png"), artifact_path="plots")
        run.client.set_tag(grpo, "budget_run", run.run_id)


