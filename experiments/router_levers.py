"""Measure the LM router's levers on a study's val split (choices) and test split (reported only).

For each router checkpoint given (e.g. the study's own, and early-exit variants trained with
``sft.router_layers``), on the study's profile:

* val: mean utility over the evaluate λ grid (the number defaults are chosen by), the blend with
  kNN that val picks (weight, energy estimate), the val error of the task-mean and the per-query
  (kNN) energy estimates, and the agreement of int8 with fp32 decisions at every λ;
* test (never used to choose): energy-AIQ of the LM router alone, blended, and of kNN, with the
  paired-bootstrap 95% CI of (blended LM − kNN).

    .venv/bin/python experiments/router_levers.py --params studies/replay/params.yaml \
        --router full=studies/replay/artifacts/grpo/model --router L6=artifacts/exp/L6/sft/model

Writes benchmarks/results/router_levers-<study>.json (or --out) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jouleroute.config import load_params  # noqa: E402
from jouleroute.evaluation.bootstrap import family_aiq, paired_aiq_difference  # noqa: E402
from jouleroute.evaluation.outcomes import build_matrix  # noqa: E402
from jouleroute.evaluation.val_utility import blend_on_val, mean_utility  # noqa: E402
from jouleroute.routing.blend import blend_scores  # noqa: E402
from jouleroute.routing.lm.router import LMRouter  # noqa: E402
from jouleroute.routing.registry import build_router  # noqa: E402
from jouleroute import stats  # noqa: E402
from jouleroute.policy.compare import difference_verdict  # noqa: E402
from jouleroute.evaluation import val_utility  # noqa: E402


# inference variants: the router params each one sets
VARIANTS = {"none": {"quantize": "none", "precision": "fp32"}, "int8": {"quantize": "int8", "precision": "fp32"},
            "bf16": {"quantize": "none", "precision": "bf16"}}


def outcomes(scores, matrix, lambdas):
    """[queries, λ] correct and energy of the decisions at each λ, aligned to ``matrix``."""
    rows = np.array([matrix.query_ids.index(q) for q in scores.query_ids])
    cols = np.array([matrix.candidates.index(c) for c in scores.candidates])
    correct, energy = matrix.correct[np.ix_(rows, cols)], matrix.energy_j[np.ix_(rows, cols)]
    picks = [scores.choices(lam) for lam in lambdas]
    at = np.arange(len(rows))
    return (np.stack([correct[at, p] for p in picks], axis=1).astype(float),
            np.stack([energy[at, p] for p in picks], axis=1))


def per_query_utility(scores, matrix, lambdas, norm) -> np.ndarray:
    """Each val query's utility averaged over ``lambdas`` (the library's, in the order of ``scores``)."""
    by_query = val_utility.per_query_utility(scores, matrix, lambdas, norm)
    return np.array([by_query[q] for q in scores.query_ids])


def paired_mean_ci(diff: np.ndarray, samples: int = 1000, seed: int = 0) -> dict:
    """Mean of a paired difference and its 95% percentile bootstrap interval (``stats.paired_mean_ci``)."""
    low, high = stats.paired_mean_ci(diff, samples, seed)
    return {"difference": float(diff.mean()), "ci_low": low, "ci_high": high,
            "verdict": difference_verdict([low, high])}  # win: this router's utility is higher beyond noise


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="studies/replay/params.yaml", help="relative to --root")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository the params' paths are under")
    parser.add_argument("--out", type=Path, default=None,
                        help="the record (default: benchmarks/results/router_levers-<study>[-<tag>].json)")
    parser.add_argument("--router", action="append", required=True,
                        help="name=checkpoint folder (relative to --root); the first is the others' reference")
    parser.add_argument("--weights", default="0,0.25,0.5,0.75")
    parser.add_argument("--tag", default=None, help="writes router_levers-<study>-<tag>.json (keeps other records)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quantize", default="none,int8",
                        help="comma list of inference variants: none (fp32), int8 (dynamic quantization), bf16 "
                             "(bfloat16 weights and activations); each adds a pass per router")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    p = load_params(root / args.params)
    profile = pd.read_parquet(p.paths.resolve("profile", root))
    queries = pd.read_parquet(p.paths.resolve("queries", root))
    lambdas, norm = list(p.evaluate.lambdas), p.energy_policy.norm
    weights = [float(w) for w in args.weights.split(",")]
    val_q = queries[queries["split"] == "val"].sort_values("query_id").reset_index(drop=True)
    test_q = queries[queries["split"] == "test"].sort_values("query_id").reset_index(drop=True)
    val_m = build_matrix(profile, queries, "val", p.energy_policy.column)
    test_m = build_matrix(profile, queries, "test", p.energy_policy.column)
    first = LMRouter(root / args.router[0].split("=", 1)[1], cfg=p.router.model_copy(update={"quantize": "none"}))
    candidates = first.candidates
    baselines = p.baselines.model_copy(update={"embedding": p.baselines.embedding.model_copy(
        update={"cache_dir": str(p.paths.resolve("embedding_cache", root))})})
    knn = build_router("knn", profile, queries, candidates, baselines, energy=p.energy_policy)
    knn_val, knn_test = knn.score(val_q), knn.score(test_q)
    cols = [test_m.candidates.index(c) for c in candidates]
    singles_c, singles_j = test_m.correct[:, cols].astype(float), test_m.energy_j[:, cols]
    knn_out = outcomes(knn_test, test_m, lambdas)
    result = {"params": args.params, "lambdas": lambdas, "energy_norm": norm, "weights": weights,
              "knn": {"val_utility": mean_utility(knn_val, val_m, lambdas, norm),
                      "test_aiq": family_aiq(singles_c.mean(0), singles_j.mean(0), knn_out[0].mean(0),
                                             knn_out[1].mean(0))},
              "routers": {}}
    quantizations = [q for q in args.quantize.split(",") if q]
    for spec in args.router:
        name, folder = spec.split("=", 1)
        row: dict = {"checkpoint": folder}
        for quantize in quantizations:
            router = LMRouter(root / folder, cfg=p.router.model_copy(update={**VARIANTS[quantize],
                                                                              "threads": args.threads}))
            row["layers"] = router.model.config.num_hidden_layers
            val, test = router.score(val_q), router.score(test_q)
            choice = blend_on_val(val, knn_val, val_m, lambdas, norm, weights)
            blended = blend_scores(test, knn_test, choice["weight"], choice["energy"])
            lm_out, blend_out = outcomes(test, test_m, lambdas), outcomes(blended, test_m, lambdas)
            ci = paired_aiq_difference(singles_c, singles_j, {"lm": blend_out, "knn": knn_out}, samples=1000)
            row[quantize] = {
                "val_utility": mean_utility(val, val_m, lambdas, norm), "blend": choice,
                "test_aiq_lm": family_aiq(singles_c.mean(0), singles_j.mean(0), lm_out[0].mean(0), lm_out[1].mean(0)),
                "test_aiq_blended": ci["families"]["knn"]["reference_aiq"], "test_blended_vs_knn": ci["families"]["knn"],
                "val_decisions": {f"{lam:g}": val.decide(lam).candidate_ids for lam in lambdas},
                "val_per_query": per_query_utility(val, val_m, lambdas, norm)}
        reference = next(iter(result["routers"].values()), row)  # the first router given (e.g. the full one)
        for quantize in quantizations:
            diff = row[quantize]["val_per_query"] - reference["none"]["val_per_query"]
            row[quantize]["val_minus_first"] = paired_mean_ci(diff)
            if quantize != "none" and "none" in quantizations:  # the same checkpoint at fp32
                row[quantize]["val_minus_fp32"] = paired_mean_ci(row[quantize]["val_per_query"]
                                                                 - row["none"]["val_per_query"])
        for quantize in quantizations:  # decision agreement of each variant with fp32, at every λ
            if quantize != "none" and "none" in quantizations:
                row[f"{quantize}_agreement_val"] = {
                    lam: float(np.mean(np.array(row["none"]["val_decisions"][lam])
                                       == np.array(row[quantize]["val_decisions"][lam])))
                    for lam in row["none"]["val_decisions"]}
        for quantize in quantizations:
            del row[quantize]["val_decisions"]
        result["routers"][name] = row
    for row in result["routers"].values():
        for quantize in quantizations:
            row[quantize]["val_per_query"] = None  # kept only to pair with the first router
    suffix = f"-{args.tag}" if args.tag else ""
    out = args.out or ROOT / "benchmarks/results" / f"router_levers-{Path(args.params).parent.name}{suffix}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(out)
    print(f"kNN: val utility {result['knn']['val_utility']:.4f}, test AIQ {result['knn']['test_aiq']:.4f}")
    print("| router | layers | quantize | val utility | blend (w/energy) | val utility blended | test AIQ LM | "
          "test AIQ blended | blended − kNN [95% CI] | agreement with fp32 (min over λ) | val − first [95% CI] |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, row in result["routers"].items():
        for quantize in quantizations:
            r = row[quantize]
            d = r["test_blended_vs_knn"]
            print(f"| {name} | {row['layers']} | {quantize} | {r['val_utility']:.4f} | {r['blend']['weight']:g}/"
                  f"{r['blend']['energy']} | {r['blend']['val_utility_chosen']:.4f} | {r['test_aiq_lm']:.4f} | "
                  f"{r['test_aiq_blended']:.4f} | {d['difference']:+.4f} [{d['ci_low']:+.4f}, {d['ci_high']:+.4f}] "
                  f"{d['verdict']} | " + (f"{min(row[quantize + '_agreement_val'].values()):.3f}"
                                          if quantize + "_agreement_val" in row else "n/a") + " | "
                  f"{r['val_minus_first']['difference']:+.4f} [{r['val_minus_first']['ci_low']:+.4f}, "
                  f"{r['val_minus_first']['ci_high']:+.4f}] |")


if __name__ == "__main__":
    main()
