"""The budget curve (issue 19): router utility on val against the joules spent profiling its training data.

On a study whose stages ran up to ``grpo`` (router_data, the base model and the trunk-feature cache
in place), for each fraction f of the train queries (drawn per task, seeded: ``sft.full_profile_fraction``):

* (a) ``sft``: SFT on a full tournament of those queries; joules = every pair of them;
* (b) ``sft+grpo``: for the fractions in ``--grpo``, GRPO with partial feedback (``reward_source:
  replay``, k = ``--k`` candidates per query) on the other train queries, from (a)'s checkpoint;
  joules = (a)'s + the distinct pairs GRPO revealed.

Each router is scored on val at every λ of the trained grid (utility = correctness − λ·norm energy,
mean over queries and λ); the paired bootstrap CI of its difference to SFT on every train query
(f = 1) is over val queries. Fraction 1 reuses the study's own SFT (its params, its checkpoint).
Trunk features of a subset are sliced from the study's cached full-train features (same frozen
weights, same prompts), so a point costs only its training.

    .venv/bin/python scripts/budget_curve.py --params studies/replay/params.yaml \
        --fractions 0.25 0.5 1 --grpo 0.25 0.5

Writes benchmarks/results/budget_curve-<study>.json and .png.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jouleroute.routing.lm.router import LMRouter  # noqa: E402
from jouleroute.routing.lm.spec import RouterSpec, prompt_ids  # noqa: E402
from jouleroute.routing.utility import utilities  # noqa: E402
from jouleroute.stages.context import StageContext  # noqa: E402
from jouleroute.stages.sft import base_model_dir  # noqa: E402
from jouleroute.training.grpo import run_grpo  # noqa: E402
from jouleroute.training.partial_feedback import pairs_joules, profiled_ids  # noqa: E402
from jouleroute.training.router_model import load_setup  # noqa: E402
from jouleroute.training.sft import read_jsonl, run_sft  # noqa: E402

log = logging.getLogger("budget_curve")


def slice_features(model_dir: str, spec: RouterSpec, rows: list[dict], subsets: list[list[dict]],
                   train_last_layers: int | None, cache_dir: Path) -> None:
    """Cache each subset's trunk features, cut from the full train set's (computed once if absent)."""
    setup = load_setup(model_dir, spec, rows, train_last_layers, "cpu", cache_dir)
    index = {r["query_id"]: i for i, r in enumerate(rows)}
    for subset in subsets:
        prompts = [prompt_ids(spec, setup.tokenizer, r["question"], r["task"]) for r in subset]
        path = cache_dir / f"trunk-{setup.split.fingerprint(prompts)}.pt"
        if not path.is_file():
            torch.save([setup.features[index[r["query_id"]]] for r in subset], path)


def val_utilities(model_dir: Path, val: pd.DataFrame, norm: str, cfg, saved: Path) -> np.ndarray:
    """[val queries] mean utility over the λ grid of the router's choices (queries in sorted id order).
    ``cfg``: the study's deployed router settings, as the stages' held-out check uses them. Saved to
    ``saved`` (an .npy) and read back while the weights are unchanged, so a rerun skips finished points."""
    stamp = max(p.stat().st_mtime for p in Path(model_dir).glob("*.safetensors"))
    if saved.is_file() and saved.stat().st_mtime > stamp:
        return np.load(saved)
    router = LMRouter(model_dir, cfg=cfg)
    per_query: dict[str, list[float]] = {}
    for lam, group in val.groupby("lam", sort=True):
        group = group.sort_values("query_id").reset_index(drop=True)
        chosen = router.route(group, lam=float(lam)).candidate_ids
        for row, cid in zip(group.to_dict("records"), chosen):
            value = utilities(row["correct_by_candidate"], row["energy_by_candidate"], float(lam), norm)
            per_query.setdefault(row["query_id"], []).append(value.get(cid, 0.0))
    result = np.array([np.mean(per_query[q]) for q in sorted(per_query)])
    saved.parent.mkdir(parents=True, exist_ok=True)
    np.save(saved, result)
    return result


def paired_ci(a: np.ndarray, b: np.ndarray, samples: int = 2000, seed: int = 0) -> list[float]:
    """95% paired-bootstrap CI of mean(a − b) over queries."""
    rng = np.random.default_rng(seed)
    diff = a - b
    means = diff[rng.integers(0, len(diff), size=(samples, len(diff)))].mean(axis=1)
    return [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", default="studies/replay/params.yaml")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument("--grpo", type=float, nargs="*", default=[0.25, 0.5])
    parser.add_argument("--k", type=int, default=2, help="candidates GRPO tries per query (grpo.num_generations)")
    parser.add_argument("--grpo-steps", type=int, default=None, help="default: the study's grpo.max_steps")
    parser.add_argument("--workdir", default=None, help="default: <the study's sft_dir>/../budget")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    ctx = StageContext.load(ROOT / args.params, ROOT)
    study = Path(args.params).parent.name if Path(args.params).parent.name != "." else "main"
    data_dir, cache_dir = ctx.path("router_data_dir"), ctx.path("trunk_cache")
    workdir = Path(args.workdir) if args.workdir else ctx.path("sft_dir").parent / "budget"
    rows = read_jsonl(data_dir / "train.jsonl")
    spec = RouterSpec.load(data_dir)
    norm = spec.energy_norm
    val = pd.DataFrame(read_jsonl(data_dir / "val.jsonl"))
    sft_cfg, grpo_cfg = ctx.params.sft, ctx.params.grpo
    base = base_model_dir(ctx)

    subsets = {f: profiled_ids(rows, f, sft_cfg.seed) for f in args.fractions if f < 1}
    chosen = [[r for r in rows if r["query_id"] in set(ids)] for ids in subsets.values()]
    rests = [[r for r in rows if r["query_id"] not in set(subsets[f])] for f in args.grpo]
    slice_features(base, spec, rows, chosen + rests, sft_cfg.train_last_layers, cache_dir)

    full_j = pairs_joules(rows)[1]
    result = {"study": study, "energy_source": spec.energy_source, "energy_norm": norm,
              "val_queries": int(val["query_id"].nunique()), "lambdas": spec.lambdas,
              "full_train_tournament_j": full_j, "points": [],
              "note": "val utility: mean over val queries of the mean over the trained λ grid; "
                      "CI: paired bootstrap over val queries vs SFT on every train query"}
    out = Path(args.out) if args.out else ROOT / "benchmarks/results" / f"budget_curve-{study}.json"
    reference = val_utilities(ctx.path("sft_dir") / "model", val, norm, ctx.params.router,
                              workdir / "val-sft-1.npy")

    def add(point: dict, name: str) -> None:
        """Score the point on val and rewrite the results, so an interrupted run keeps finished points."""
        utility = val_utilities(Path(point["model"]), val, norm, ctx.params.router, workdir / f"val-{name}.npy")
        point.update(val_utility=float(utility.mean()), share_of_full_j=point["profiling_j"] / full_j,
                     minus_full_sft=float(utility.mean() - reference.mean()),
                     minus_full_sft_ci95=paired_ci(utility, reference))
        result["points"].append(point)
        out.write_text(json.dumps(result, indent=2) + "\n")
        plot(result, out.with_suffix(".png"))
        log.info("%s", point)

    add({"recipe": "sft", "fraction": 1.0, "n_profiled": len(rows), "profiling_j": full_j,
         "model": str(ctx.path("sft_dir") / "model")}, "sft-1")
    for f, subset in zip(subsets, chosen):
        sft_out = workdir / f"sft-{f:g}"
        if not (sft_out / "model").is_dir():
            run_sft(sft_cfg.model_copy(update={"full_profile_fraction": f}), data_dir, base, sft_out,
                    cache_dir=cache_dir)
        add({"recipe": "sft", "fraction": f, "n_profiled": len(subset), "profiling_j": pairs_joules(subset)[1],
             "model": str(sft_out / "model")}, f"sft-{f:g}")
        if f in args.grpo:
            cfg = grpo_cfg.model_copy(update={"reward_source": "replay", "num_generations": args.k,
                                              "max_steps": args.grpo_steps or grpo_cfg.max_steps})
            g_out = workdir / f"grpo-{f:g}-k{args.k}"
            done = g_out / "metrics.json"
            metrics = json.loads(done.read_text()) if done.is_file() and (g_out / "model").is_dir() else run_grpo(
                cfg, data_dir, sft_out, g_out, cache_dir=cache_dir, prior_strength=ctx.params.router_data.prior_strength)
            bill = metrics["profiling"]
            add({"recipe": "sft+grpo", "fraction": f, "n_profiled": len(subset), "k": args.k,
                 "grpo_steps": cfg.max_steps, "revealed_pairs": bill["grpo_revealed"]["pairs"],
                 "rollouts": bill["grpo_revealed"]["rollouts"], "profiling_j": bill["total_joules"],
                 "model": str(g_out / "model")}, f"grpo-{f:g}-k{args.k}")
    print(json.dumps(result, indent=2))


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for recipe, marker in (("sft", "o-"), ("sft+grpo", "s")):
        pts = sorted((p for p in result["points"] if p["recipe"] == recipe), key=lambda p: p["profiling_j"])
        if pts:
            ax.plot([p["profiling_j"] / 1000 for p in pts], [p["val_utility"] for p in pts], marker,
                    label=recipe if recipe == "sft" else f"sft + GRPO (replay, k={pts[0]['k']})")
    ax.set_xlabel(f"profiling energy (kJ, {result['energy_source']})")
    ax.set_ylabel("val utility (mean over λ grid)")
    ax.set_title(f"Budget curve: {result['study']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
