"""Choose GRPO's k (candidates per query) and steps on val: a sweep of the budget stage's (b) point.

Each setting is the replay study's budget stage run with a params copy whose ``budget`` section sets
``grpo_fractions: [f]``, ``num_generations: k``, ``max_steps: steps`` and its own ``paths.budget_dir``
(``jouleroute --params <copy> budget``; the study's SFT on every train query is the reference). This
script collects their budget.json files into one record. The rule that chooses, on val only: among
the settings whose SFT + GRPO point ties SFT on every train query on val (the paired CI contains 0),
the one with the fewest profiling joules; ties on joules go to the higher val utility.

    .venv/bin/python experiments/grpo_sweep.py studies/replay/artifacts/budget studies/replay/artifacts/budget-sweep-k2-s100 ...

Writes benchmarks/results/grpo_sweep-replay.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def settings(budget_dirs: list[Path], fraction: float) -> list[dict]:
    rows = []
    for folder in budget_dirs:
        record = json.loads((folder / "budget.json").read_text())
        for point in record["points"]:
            if point["recipe"] == "sft+grpo" and abs(point["fraction"] - fraction) < 1e-9:
                low, high = point["val_minus_full_sft_ci95"]
                rows.append({"budget_dir": str(folder), "k": point["k"], "steps": point["grpo_steps"],
                             "fraction": fraction, "profiling_j": point["profiling_j"],
                             "share_of_full": point["share_of_full_train_tournament"],
                             "revealed_pairs": point["revealed_pairs"], "val_utility": point["val_utility"],
                             "val_minus_full_sft": point["val_minus_full_sft"], "val_ci95": [low, high],
                             "val_tie": bool(low <= 0 <= high), "test_utility": point["test_utility"],
                             "test_minus_full_sft": point["test_minus_full_sft"],
                             "test_ci95": point["test_minus_full_sft_ci95"]})
    return sorted(rows, key=lambda r: (r["k"], r["steps"]))


def choose(rows: list[dict]) -> dict | None:
    """The rule (module doc): the fewest profiling joules among the settings that tie on val, then the higher val
    utility; ``None`` when no setting ties."""
    tying = [r for r in rows if r["val_tie"]]
    return min(tying, key=lambda r: (r["profiling_j"], -r["val_utility"])) if tying else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("budget_dirs", nargs="+", type=Path)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/grpo_sweep-replay.json",
                        help="the record to write (default: the one docs/router-training.md is generated from)")
    args = parser.parse_args()
    rows = settings([d if d.is_absolute() else ROOT / d for d in args.budget_dirs], args.fraction)
    if not rows:
        raise SystemExit(f"no sft+grpo point at fraction {args.fraction} in {args.budget_dirs}")
    chosen = choose(rows)
    out = args.out
    out.write_text(json.dumps({"study": "replay", "fraction": args.fraction, "settings": rows,
                               "rule": "fewest profiling joules among the settings that tie SFT on every train "
                                       "query on val (paired CI contains 0); then the higher val utility",
                               "chosen": None if chosen is None else {"k": chosen["k"], "steps": chosen["steps"]}},
                              indent=2) + "\n")
    print(out)


if __name__ == "__main__":
    main()
