"""The budget curve (issue 19): router utility against the joules spent profiling its training data.

For each fraction f of each task's train queries (``partial_feedback.profiled_ids``, seeded by ``sft.seed``):

* (a) ``sft``: SFT on a full tournament of those queries; its bill is every pair of them;
* (b) ``sft+grpo`` (``budget.grpo_fractions``): (a)'s checkpoint, then GRPO with partial feedback on the other
  train queries (k = ``budget.num_generations`` candidates per query); its bill adds the distinct pairs GRPO
  revealed (replay) or read and ran (live).

Every router is scored on val and on test: per query, the mean over the trained λ grid of the utility
(correctness − λ·normalized energy, the labels' norm) of its choice. The paired bootstrap 95% CI of its
difference to (a) at f = 1 is over the split's queries. Test is reported only: nothing here is chosen on it.
Trunk features of a subset are cut from the full train set's cached ones (same frozen weights, same prompts),
so a point costs its training and its routing only.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

from jouleroute.training.config import BudgetConfig, GrpoConfig, SftConfig
from jouleroute.stats import paired_mean_ci

if TYPE_CHECKING:  # partial_feedback imports transformers: the reports import this module for budget_section
    from jouleroute.training.partial_feedback import Outcomes

log = logging.getLogger(__name__)

NOTE = ("utility: per query, the mean over the trained λ grid of correctness − λ·normalized energy of the "
        "router's choice, averaged over the split's queries; CI: 95% paired bootstrap over the split's queries "
        "of the point minus SFT on every train query (the reference). Test is reported, never used to choose.")


@dataclass
class BudgetInputs:
    """What the curve is computed from: router_data's folder, the routers' base model, the pipeline's SFT."""

    data_dir: Path  # router_data: train.jsonl, val.jsonl, router_spec.json, stats.json
    base_model_dir: str  # sft.base_model, resolved
    sft_dir: Path  # the pipeline's SFT (its share is tournament.train_fraction): reused for the point it fitted
    test: pd.DataFrame  # test queries x the λ grid: query_id, task, question, lam, *_by_candidate
    out_dir: Path  # budget.json, budget.png, and the points' routers under routers/
    cache_dir: Path | None = None  # trunk features
    prior_strength: float | None = None  # router_data's (the replay reward's prior)


def outcome_rows(profile: pd.DataFrame, queries: pd.DataFrame, energy_column: str, lambdas: Sequence[float],
              candidates: Sequence[str]) -> pd.DataFrame:
    """The test split in val.jsonl's shape: one row per (test query with every candidate's outcome, λ)."""
    test = profile[profile["split"] == "test"]
    if test.empty:
        return pd.DataFrame(columns=["query_id", "task", "question", "lam", "correct_by_candidate",
                                     "energy_by_candidate"])
    question = queries.drop_duplicates("query_id").set_index("query_id")["question"].astype(str)
    rows = []
    for qid, group in test.groupby("query_id", sort=True):
        if set(group["candidate_id"]) != set(candidates):
            continue  # a query some candidate never answered: no full outcome row to score it on
        correct = {str(c): float(v) for c, v in zip(group["candidate_id"], group["correct"])}
        energy = {str(c): float(v) for c, v in zip(group["candidate_id"], group[energy_column])}
        for lam in lambdas:
            rows.append({"query_id": str(qid), "task": str(group["task"].iloc[0]), "question": question[qid],
                         "lam": float(lam), "correct_by_candidate": correct, "energy_by_candidate": energy})
    return pd.DataFrame(rows)


def split_utilities(model_dir: Path, frame: pd.DataFrame, norm: str, router_cfg) -> np.ndarray:
    """[queries, sorted by id] the router's mean utility over the λ of ``frame`` (``rows_per_query_utility``, the
    one code path for a router's utility on router_data rows)."""
    from jouleroute.routing.lm.router import LMRouter
    from jouleroute.routing.utility import rows_per_query_utility

    if frame.empty:
        return np.zeros(0)
    frame = frame.sort_values(["lam", "query_id"]).reset_index(drop=True)  # same order at every λ: scored once
    per_query = rows_per_query_utility(LMRouter(model_dir, cfg=router_cfg), frame, norm)
    return np.array([per_query[q] for q in sorted(per_query)])


def paired_ci(a: np.ndarray, b: np.ndarray, samples: int, seed: int) -> list[float] | None:
    """95% paired-bootstrap CI of mean(a − b) over queries (None without queries): ``stats.paired_mean_ci``."""
    return paired_mean_ci(np.asarray(a, dtype=float) - np.asarray(b, dtype=float), samples, seed)


def slice_features(inputs: BudgetInputs, sft_cfg: SftConfig, rows: list[dict], subsets: list[list[dict]]) -> None:
    """Cache each subset's trunk features, cut from the full train set's (computed once if absent)."""
    if inputs.cache_dir is None or not subsets:
        return
    import torch

    from jouleroute.routing.lm.spec import RouterSpec, prompt_ids
    from jouleroute.training.router_model import load_setup

    spec = RouterSpec.load(inputs.data_dir)
    setup = load_setup(inputs.base_model_dir, spec, rows, sft_cfg.train_last_layers, sft_cfg.device,
                       inputs.cache_dir, keep_layers=sft_cfg.router_layers)
    index = {r["query_id"]: i for i, r in enumerate(rows)}
    for subset in subsets:
        prompts = [prompt_ids(spec, setup.tokenizer, r["question"], r["task"]) for r in subset]
        path = Path(inputs.cache_dir) / f"trunk-{setup.split.fingerprint(prompts)}.pt"
        if not path.is_file():
            torch.save([setup.features[index[r["query_id"]]] for r in subset], path)


def run_budget(cfg: BudgetConfig, sft_cfg: SftConfig, grpo_cfg: GrpoConfig, router_cfg, inputs: BudgetInputs,
               *, live: Callable[..., "Outcomes"] | None = None, on_point: Callable[[dict], None] | None = None,
               completed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The curve's points (see the module docstring); writes ``budget.json`` and ``budget.png`` after each
    point, so an interrupted run shows what it finished. ``live``: the outcome source for
    ``grpo.reward_source: live`` (the stage passes ``tournament.live.LiveOutcomes``); any other source is
    replayed from the profile (``profile`` included: partial feedback on the same table). ``completed``: what
    completing the train tournament for the curve ran (live, when the tournament profiled SFT's share only);
    recorded as the curve's own cost."""
    from jouleroute.routing.lm.spec import RouterSpec
    from jouleroute.training.grpo import run_grpo
    from jouleroute.training.partial_feedback import pairs_joules, profiled_ids
    from jouleroute.training.sft import read_jsonl, run_sft

    data_dir, out_dir = Path(inputs.data_dir), Path(inputs.out_dir)
    routers = out_dir / "routers"
    routers.mkdir(parents=True, exist_ok=True)
    rows = read_jsonl(data_dir / "train.jsonl")
    spec = RouterSpec.load(data_dir)
    val = pd.DataFrame(read_jsonl(data_dir / "val.jsonl")) if (data_dir / "val.jsonl").is_file() else pd.DataFrame()
    splits = {"val": val, "test": inputs.test}
    source = "live" if grpo_cfg.reward_source == "live" else "replay"
    steps = cfg.max_steps or grpo_cfg.max_steps
    full_pairs, full_j = pairs_joules(rows)
    result: dict[str, Any] = {
        "energy_source": spec.energy_source, "energy_norm": spec.energy_norm, "lambdas": spec.lambdas,
        "reward_source": source, "params_reward_source": grpo_cfg.reward_source, "num_generations":
        cfg.num_generations, "grpo_steps": steps, "train_queries": len(rows),
        "queries": {name: int(frame["query_id"].nunique()) if len(frame) else 0 for name, frame in splits.items()},
        "full_train_tournament": {"pairs": full_pairs, "joules": full_j}, "note": NOTE, "points": []}
    if completed is not None:
        result["completed_for_curve"] = completed

    subsets = {f: set(profiled_ids(rows, f, sft_cfg.seed)) for f in cfg.points}
    chosen = [[r for r in rows if r["query_id"] in subsets[f]] for f in cfg.points if f < 1]
    rests = [[r for r in rows if r["query_id"] not in subsets[f]] for f in cfg.grpo_fractions]
    slice_features(inputs, sft_cfg, rows, chosen + rests)

    own = _own_queries(inputs.sft_dir)
    scores: dict[str, dict[str, np.ndarray]] = {}

    def score(point: dict, model: Path) -> None:
        """Utilities on val and test, their CI against the reference, then the files rewritten."""
        scores[point["name"]] = {s: split_utilities(model, frame, spec.energy_norm, router_cfg)
                                 for s, frame in splits.items()}
        reference = scores["sft@1"]
        for split, values in scores[point["name"]].items():
            point[f"{split}_utility"] = float(values.mean()) if len(values) else None
            point[f"{split}_minus_full_sft"] = (float((values - reference[split]).mean())
                                                if len(values) else None)
            point[f"{split}_minus_full_sft_ci95"] = paired_ci(values, reference[split], cfg.bootstrap_samples,
                                                              cfg.seed)
        point["share_of_full_train_tournament"] = point["profiling_j"] / full_j if full_j > 0 else None
        result["points"].append(point)
        write_json(out_dir / "budget.json", result)
        plot_budget(result, out_dir / "budget.png")
        log.info("budget point %s: val %.4f, test %s, %.1f J (%.0f%% of the full train tournament)",
                 point["name"], point["val_utility"] or float("nan"), point["test_utility"], point["profiling_j"],
                 100 * (point["share_of_full_train_tournament"] or 0))
        if on_point is not None:
            on_point(point)

    order = [1.0] + [f for f in cfg.points if f < 1]  # the reference first: every CI is against it
    for f in order:
        subset = [r for r in rows if r["query_id"] in subsets[f]]
        if own is not None and own == subsets[f]:
            sft_dir = Path(inputs.sft_dir)  # the pipeline's own SFT checkpoint fitted these queries: reused
        else:
            sft_dir = routers / f"sft-{f:g}"
            run_sft(sft_cfg, data_dir, inputs.base_model_dir, sft_dir, share=f, share_seed=sft_cfg.seed,
                    cache_dir=inputs.cache_dir)
        pairs, joules = pairs_joules(subset)
        score({"name": f"sft@{f:g}", "recipe": "sft", "fraction": f, "n_profiled": len(subset),
               "profiling_pairs": pairs, "profiling_j": joules, "by_source": {spec.energy_source: joules},
               "reused_pipeline_sft": sft_dir == Path(inputs.sft_dir)}, sft_dir / "model")
        if f in cfg.grpo_fractions and len(subset) == len(rows):
            log.warning("budget: no sft+grpo point at fraction %g: it profiles every train query (at least one "
                        "per task), none is left for partial feedback", f)
            result.setdefault("skipped", []).append({"name": f"sft+grpo@{f:g}", "reason": "no unprofiled train query"})
        elif f in cfg.grpo_fractions:
            grpo_dir = routers / f"grpo-{f:g}-k{cfg.num_generations}"
            point_cfg = grpo_cfg.model_copy(update={"reward_source": source, "num_generations": cfg.num_generations,
                                                    "max_steps": steps})
            metrics = run_grpo(point_cfg, data_dir, sft_dir, grpo_dir, cache_dir=inputs.cache_dir,
                               prior_strength=inputs.prior_strength, live=live)
            bill = metrics["profiling"]
            score({"name": f"sft+grpo@{f:g}", "recipe": "sft+grpo", "fraction": f, "n_profiled": len(subset),
                   "k": cfg.num_generations, "grpo_steps": steps, "revealed_pairs": bill["grpo_revealed"]["pairs"],
                   "rollouts": bill["grpo_revealed"]["rollouts"],
                   "executed_pairs": bill["grpo_revealed"].get("executed_pairs"),
                   "profiling_pairs": bill["tournament"]["pairs"] + bill["grpo_revealed"]["pairs"],
                   "profiling_j": bill["total_joules"], "by_source": bill["by_source"]}, grpo_dir / "model")
    return result


def _own_queries(sft_dir: Path) -> set[str] | None:
    """The train queries the pipeline's SFT fitted (its profiled_queries.json), None when unknown."""
    from jouleroute.training.partial_feedback import PROFILED_FILE

    path = Path(sft_dir) / PROFILED_FILE
    if not path.is_file() or not (Path(sft_dir) / "model").is_dir():
        return None
    return {str(q) for q in json.loads(path.read_text()).get("query_ids", [])}


def write_json(path: Path, obj: Any) -> None:
    from jouleroute.atomic import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def plot_budget(result: dict, path: Path) -> Path:
    """Val and test utility against profiling kJ: (a) as a line, (b) as squares."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    for ax, split in zip(axes, ("val", "test")):
        for recipe, marker in (("sft", "o-"), ("sft+grpo", "s")):
            pts = sorted((p for p in result["points"] if p["recipe"] == recipe and p.get(f"{split}_utility")
                          is not None), key=lambda p: p["profiling_j"])
            if pts:
                label = "SFT on a full tournament of f" if recipe == "sft" else \
                    f"SFT(f) + GRPO ({result['reward_source']}, k={pts[0]['k']})"
                ax.plot([p["profiling_j"] / 1000 for p in pts], [p[f"{split}_utility"] for p in pts], marker,
                        label=label)
                for p in pts:
                    ax.annotate(f"{p['fraction']:g}", (p["profiling_j"] / 1000, p[f"{split}_utility"]),
                                textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xlabel(f"profiling energy (kJ, {result['energy_source']})")
        ax.set_ylabel(f"{split} utility (mean over the λ grid)")
        ax.set_title(f"{split}" + (" (reported only)" if split == "test" else ""))
        ax.legend(fontsize=7)
    fig.suptitle("Budget curve: router utility against the joules spent profiling its training data")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def budget_lines(result: dict, png: str) -> list[str]:
    """The reports' "Budget curve" section: a table of every point and the plot (``png``, a relative link)."""
    def ci(p: dict, split: str) -> str:
        value, bounds = p.get(f"{split}_minus_full_sft"), p.get(f"{split}_minus_full_sft_ci95")
        if value is None:
            return "n/a"
        return f"{value:+.4f} [{bounds[0]:+.4f}, {bounds[1]:+.4f}]" if bounds else f"{value:+.4f}"

    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4f}"

    full = result["full_train_tournament"]
    lines = ["", "## Budget curve", "",
             f"Router utility against the joules spent profiling its training data (`{result['energy_source']}` "
             f"joules; a full tournament of the {result['train_queries']} train queries is {full['pairs']} pairs, "
             f"{full['joules'] / 1000:.3g} kJ). (a) `sft`: SFT on a full tournament of a fraction f of each task's "
             f"train queries; (b) `sft+grpo`: that SFT, then GRPO with partial feedback ({result['reward_source']}, "
             f"k = {result['num_generations']} candidates per query, {result['grpo_steps']} steps) on the other "
             "train queries, its bill adding every distinct pair it revealed. Δ: the point minus SFT on every "
             "train query, with the 95% paired-bootstrap CI over the split's queries. Test is reported, never "
             "used to choose.", "",
             "| router | f | pairs | profiling kJ | share of full | val utility | Δ val [95% CI] | test utility "
             "| Δ test [95% CI] |",
             "|---|---:|---:|---:|---:|---:|---|---:|---|"]
    for p in sorted(result["points"], key=lambda p: (p["profiling_j"], p["recipe"])):
        share = p.get("share_of_full_train_tournament")
        lines.append(f"| {p['recipe']} | {p['fraction']:g} | {p['profiling_pairs']} | {p['profiling_j'] / 1000:.3g} | "
                     f"{'' if share is None else f'{share:.0%}'} | {fmt(p.get('val_utility'))} | {ci(p, 'val')} | "
                     f"{fmt(p.get('test_utility'))} | {ci(p, 'test')} |")
    done = result.get("completed_for_curve")
    if done:
        lines += ["", f"The tournament profiled only SFT's share of the train queries (`grpo.reward_source: live`); "
                      f"for (a) at f = 1 this stage completed it: {done['pairs']} pairs of {done['queries']} queries, "
                      f"{done['executed_pairs']} run now ({done['executed_j'] / 1000:.3g} kJ, billed to the curve, "
                      "not to the deployed router), the rest read from the live-pair cache where GRPO's rollouts left them."]
    sources = sorted({s for p in result["points"] for s in p.get("by_source", {})})
    lines += ["", f"Energy sources of the profiling joules: {', '.join(f'`{s}`' for s in sources) or 'none'}.",
              "", f"![Budget curve]({png})"]
    return lines


def budget_section(budget_dir: Path, doc: Path) -> list[str]:
    """A report's "Budget curve" section from the budget stage's output: its plot copied beside ``doc``
    (``<doc stem>-budget.png``, linked relatively) and the table; empty when the stage has not run."""
    import shutil

    source, png = Path(budget_dir) / "budget.json", Path(budget_dir) / "budget.png"
    if not source.is_file():
        return []
    target = doc.with_name(f"{doc.stem}-budget.png")
    if png.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, target)
    return budget_lines(json.loads(source.read_text()), target.name)
