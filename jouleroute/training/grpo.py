"""Stage ``grpo``: sharpen the SFT router with GRPO on the reward of each choice (TRL GRPOTrainer).

A one-step action: each prompt is (train query, λ), the completion is one label token sampled
from ``softmax((z(x) − λ·s·ê) / T)`` over the pool (``training.policy``), and
``num_generations`` (default: the pool size) completions per prompt form GRPO's group. The
reward is ``correctness − λ · normalized energy`` of the named candidate on that query, the
same utility the SFT labels maximize, so GRPO keeps optimizing what SFT imitated. No reference
model by default (``beta = 0``). Besides TRL's logs (loss, reward, each
``rewards/<name>/mean``), the share of completions per candidate is logged as
``choices/<candidate>`` and the chosen normalized energy per λ as ``chosen_norm_energy/lam_<λ>``.

``grpo.reward_source`` says where a reward comes from: ``profile`` (default) looks the choice up in
the full profile; ``replay`` learns from partial feedback on the train queries SFT did not profile,
reading only the sampled pairs (``training.partial_feedback``); ``live`` does the same with outcomes
from the tournament's shard store or the live-pair cache, running into the cache the sampled pairs both
lack (``tournament.live``).
Either way the metrics carry ``profiling``: the joules spent to obtain the training outcomes,
labelled by energy source.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from transformers import TrainerCallback

from jouleroute.routing.lm.spec import RouterSpec, format_lambda
from jouleroute.routing.scores import normalize_energy_map
from jouleroute.training.common import (
    MODEL, quiet_trainer, resume_point, save_final_model, seed_everything, set_threads, trainer_kwargs, train_timed,
    write_json,
)
from jouleroute.tracking import StageRun
from jouleroute.training.config import GrpoConfig
from jouleroute.training.mlflow_log import MlflowMetricsCallback, log_stage_end, log_stage_start
from jouleroute.training.partial_feedback import (
    Outcomes, ReplayRewards, RevealedOutcomes, RevealedCheckpoints, profiling_joules, read_profiled,
)
from jouleroute.training.policy import attach_policy, detach_policy, release_fused_head
from jouleroute.training.rewards import build_rewards
from jouleroute.training.router_data import UNPROFILED
from jouleroute.training.router_model import load_setup, marked_prompt, policy_cache
from jouleroute.training.sft import read_jsonl

log = logging.getLogger(__name__)


def _by_label(spec: RouterSpec, table: dict[str, Any], column: str, source: Path, number: int) -> str:
    """A per-candidate table re-keyed by label token (what a completion decodes to), as JSON."""
    if set(table) != set(spec.candidates):
        raise ValueError(f"{source}: row {number}: field '{column}' must cover exactly the candidates "
                         f"{sorted(spec.candidates)}")
    return json.dumps({label: table[c] for c, label in zip(spec.candidates, spec.labels)}, sort_keys=True)


def track_choices(reward: Callable, spec: RouterSpec, energy_norm: str) -> Callable:
    """Wrap a reward so each call also logs the candidate distribution (via TRL's ``log_metric``)."""
    name_of = dict(zip(spec.labels, spec.candidates))

    def tracked(completions, log_metric=None, **columns):
        if log_metric is not None:
            picks = [str(c).strip() for c in completions]
            counts = Counter(name_of.get(p, "invalid") for p in picks)
            for cid in [*spec.candidates, "invalid"]:
                log_metric(f"choices/{cid}", counts.get(cid, 0) / len(picks))
            by_lam: dict[str, list[float]] = defaultdict(list)
            for pick, lam, energy in zip(picks, columns["lam"], columns["energy_by_candidate"]):
                normed = normalize_energy_map(json.loads(energy), energy_norm)
                by_lam[format_lambda(lam)].append(normed.get(pick, 1.0))
            for lam, values in by_lam.items():
                log_metric(f"chosen_norm_energy/lam_{lam}", sum(values) / len(values))
        return reward(completions, **columns)

    tracked.__name__ = reward.__name__
    return tracked


def run_grpo(cfg: GrpoConfig, data_dir: Path, sft_dir: Path, out_dir: Path, run: StageRun | None = None,
             *, callbacks: Sequence[TrainerCallback] = (), cache_dir: Path | None = None,
             progress=None, prior_strength: float | None = None,
             live: Callable[..., Outcomes] | None = None) -> dict:
    """GRPO from ``sft_dir/model`` on train.jsonl x λ; saves ``out_dir/model``; returns metrics. ``run``: the
    MLflow run the caller opened (the `grpo` stage's), which gets the params and the training curves.

    ``reward_source: replay`` trains on the train queries SFT did not profile, one prompt per query and
    λ for ``replay_lambdas_per_query`` seeded λ of the grid, reading only the sampled candidates'
    outcomes. ``reward_source: live`` does the same with ``live(energy_column=, query_ids=)``, the outcome source
    the caller opens (the stage: ``tournament.live.LiveOutcomes``): a sampled pair is read from the tournament's
    shard store or the live-pair cache, or answered now and stored in the cache. ``prior_strength``: router_data's (default:
    its default)."""
    seed_everything(cfg.seed)
    set_threads(cfg.threads)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer  # slow import (~12 s): keep it out of module import

    data_dir, sft_model, out_dir = Path(data_dir), Path(sft_dir) / MODEL, Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = RouterSpec.load(sft_model)
    lambdas = list(cfg.lambdas or spec.lambdas)
    for lam in lambdas:
        spec.check_lambda(lam)
    source = data_dir / "train.jsonl"
    rows = read_jsonl(source)
    partial = cfg.reward_source in ("replay", "live")  # partial feedback, from a table or run live
    tournament_rows, outcomes = rows, None  # profile: GRPO reads every pair of every train query
    if partial:
        _check_replay_generations(cfg, len(spec.candidates))
        rows, tournament_rows, outcomes = _partial_feedback_rows(cfg, rows, Path(sft_dir), source, live)
    setup = load_setup(sft_model, spec, rows, cfg.train_last_layers, cfg.device, cache_dir, progress)
    generations = cfg.num_generations or len(spec.candidates)
    cache = policy_cache(setup, rows, temperature=cfg.temperature)
    prompts = []
    lam_rng = random.Random(cfg.seed)
    for i, row in enumerate(rows):
        if partial:  # the outcomes stay in `outcomes`: the prompt row names the query, nothing more
            for lam in sorted(lam_rng.sample(lambdas, min(cfg.replay_lambdas_per_query, len(lambdas)))):
                text = marked_prompt(setup, row, f"{i}:{lambdas.index(lam)}")
                cache.register(setup.tokenizer(text=[text])["input_ids"][0], i, lam)
                prompts.append({"prompt": text, "lam": float(lam), "query_id": row["query_id"], "task": row["task"]})
            continue
        correct = _by_label(spec, row["correct_by_candidate"], "correct_by_candidate", source, i + 1)
        energy = _by_label(spec, row["energy_by_candidate"], "energy_by_candidate", source, i + 1)
        expected = _by_label(spec, row.get("expected_correct_by_candidate") or row["correct_by_candidate"],
                             "expected_correct_by_candidate", source, i + 1)
        for j, lam in enumerate(lambdas):
            text = marked_prompt(setup, row, f"{i}:{j}")
            cache.register(setup.tokenizer(text=[text])["input_ids"][0], i, lam)  # exactly as TRL tokenizes
            prompts.append({"prompt": text, "lam": float(lam), "query_id": row["query_id"],
                            "correct_by_candidate": correct, "energy_by_candidate": energy,
                            "expected_correct_by_candidate": expected})
    if partial:
        if prior_strength is None:
            from jouleroute.training.config import RouterDataConfig

            prior_strength = RouterDataConfig().prior_strength
        funcs, weights = ReplayRewards(outcomes, spec.labels, spec.candidates, tournament_rows, spec.energy_norm,
                                       prior_strength).build(cfg.rewards)
    else:
        funcs, weights = build_rewards(cfg.rewards, spec.energy_norm)
        funcs[0] = track_choices(funcs[0], spec, spec.energy_norm)
    args = GRPOConfig(
        **trainer_kwargs(cfg, out_dir, setup.device, run_name="grpo"),
        per_device_train_batch_size=cfg.prompts_per_step * generations, num_generations=generations,
        max_completion_length=1, temperature=cfg.temperature, beta=cfg.beta, reward_weights=weights,
        scale_rewards=cfg.scale_rewards,
        log_completions=False,
    )
    resume = resume_point(out_dir, cfg, [source, *sorted(sft_model.glob("*.safetensors"))])
    facts = {"sft_model": str(sft_model), "n_prompts": len(prompts), "device": setup.device,
             "num_generations": generations, "candidates": ",".join(spec.candidates), "resumed_from": resume or "",
             "lambdas": ",".join(format_lambda(x) for x in lambdas), "reward_source": cfg.reward_source}
    if outcomes is not None and resume:
        RevealedCheckpoints.restore(outcomes, Path(resume))  # reads before the kill are still paid for
    model = attach_policy(setup.model, cache)
    log_stage_start(run, facts)
    trainer = quiet_trainer(GRPOTrainer(
        model=model, reward_funcs=funcs, args=args, train_dataset=Dataset.from_list(prompts),
        processing_class=setup.tokenizer,
        callbacks=[MlflowMetricsCallback(run), *([RevealedCheckpoints(outcomes)] if outcomes else []), *callbacks]))
    release_fused_head(model)
    try:
        metrics = train_timed(trainer, resume)
    finally:
        if hasattr(outcomes, "close"):  # live: free the candidates' models
            outcomes.close()
    detach_policy(model)
    model_dir = save_final_model(model, setup.tokenizer, out_dir, sft_model)
    metrics.update(n_prompts=len(prompts), device=setup.device, num_generations=generations,
                   trunk_features_s=setup.features_s, **setup.split.sizes(),
                   **_reward_trend(trainer.state.log_history))
    metrics["profiling"] = profiling_joules(spec.energy_source, _energy_column(data_dir), cfg.reward_source,
                                            tournament_rows, outcomes)
    if len(metrics["profiling"]["by_source"]) > 1:  # live rows metered unlike the profile: said, never silent
        log.warning("GRPO rewards compared joules of different energy sources %s (profile: %s)",
                    sorted(metrics["profiling"]["by_source"]), spec.energy_source)
    _log_profiling(run, metrics["profiling"])
    if outcomes is not None:  # the audit trail of what partial feedback read: [query_id, candidate, reads]
        write_json(out_dir / "revealed_pairs.json", [[q, c, n] for (q, c), n in sorted(outcomes.reads.items())])
        write_json(out_dir / "replay_prompts.json", [[p["query_id"], p["lam"]] for p in prompts])
    if hasattr(outcomes, "executed"):  # live: the pairs this run answered and stored (the rest were in the store)
        write_json(out_dir / "executed_pairs.json", sorted([q, c] for q, c in outcomes.executed))
    log_stage_end(run, "grpo", metrics, model_dir, cfg)
    write_json(out_dir / "metrics.json", metrics)
    return metrics


def _partial_feedback_rows(cfg: GrpoConfig, rows: list[dict], sft_dir: Path, source: Path,
                           live: Callable[..., Outcomes] | None):
    """(rows GRPO rolls out on, rows SFT profiled, their outcome accessor) for ``replay`` and ``live``."""
    profiled = set(read_profiled(sft_dir))
    known = [r for r in rows if str(r["query_id"]) in profiled]
    rest = [r for r in rows if str(r["query_id"]) not in profiled]
    unprofiled = source.parent / UNPROFILED  # train queries the tournament never ran (live): no outcome recorded
    if unprofiled.is_file():
        extra = read_jsonl(unprofiled)
        if cfg.reward_source != "live":
            raise ValueError(f"{unprofiled}: {len(extra)} train queries have no tournament outcome, which "
                             f"grpo.reward_source: {cfg.reward_source} would read; use live (it runs them), or "
                             "rerun the tournament with another reward source")
        rest += extra
    if not rest:
        raise ValueError(f"grpo.reward_source: {cfg.reward_source} needs tournament.train_fraction < 1: SFT "
                         f"fitted every train query of {source}, none is left for partial feedback")
    if cfg.reward_source == "live":
        if live is None:
            raise ValueError("grpo.reward_source: live needs the tournament's outcome source (backend, pool, shard "
                             "store): run it through the grpo stage, which passes it")
        column = _energy_column(source.parent)
        if column == "unknown":
            raise ValueError(f"{source.parent / 'stats.json'}: field 'energy_column' is missing: rerun router_data")
        outcomes = live(energy_column=column, query_ids=[r["query_id"] for r in rest])
    else:
        outcomes = RevealedOutcomes.from_rows(rest, source)
    return [{k: r[k] for k in ("query_id", "task", "question")} for r in rest], known, outcomes


def _check_replay_generations(cfg: GrpoConfig, pool: int) -> None:
    """k >= the pool size is allowed (the embedded pool has 2 candidates and GRPO needs a group of 2): the
    k completions of a prompt are sampled with replacement, so the distinct pairs a query reveals are <= k,
    often fewer, and partial feedback still reads only those."""
    generations = cfg.num_generations or pool
    if generations >= pool:
        log.info("grpo.num_generations = %d >= the pool size %d with reward_source: %s: the %d completions of a "
                 "prompt are sampled with replacement, so each query reveals at most %d distinct pairs (often fewer)",
                 generations, pool, cfg.reward_source, generations, min(generations, pool))


def _energy_column(data_dir: Path) -> str:
    stats = data_dir / "stats.json"
    return json.loads(stats.read_text()).get("energy_column", "unknown") if stats.is_file() else "unknown"


def _log_profiling(run: StageRun | None, profiling: dict[str, Any]) -> None:
    """The profiling bill into the stage's MLflow run: joules as metrics, their source label as a tag."""
    if run is None:
        return
    run.set_tags({"profiling_energy_source": profiling["energy_source"]})
    run.log_metrics({"profiling_j.total": profiling["total_joules"],
                     "profiling_j.tournament": profiling["tournament"]["joules"],
                     "profiling_j.grpo_revealed": profiling["grpo_revealed"]["joules"],
                     "profiling_pairs.tournament": profiling["tournament"]["pairs"],
                     "profiling_pairs.grpo_revealed": profiling["grpo_revealed"]["pairs"],
                     "profiling_rollouts.grpo": profiling["grpo_revealed"]["rollouts"]})


def _reward_trend(history: list[dict[str, Any]]) -> dict[str, Any]:
    """First and last logged reward / choice shares, for the stage's metrics.json."""
    logged = [h for h in history if "reward" in h]
    if not logged:
        return {}
    first, last = logged[0], logged[-1]
    keep = [k for k in last if k == "reward" or k.startswith(("rewards/", "choices/", "kl"))]
    return {"first_log": {k: first.get(k) for k in keep}, "last_log": {k: last.get(k) for k in keep},
            "reward_curve": [[h.get("step"), h["reward"]] for h in logged]}
