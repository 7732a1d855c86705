"""The LM router as a cascade's verifier (issue 42, item 4), on a finished study's artifacts.

  run:   choose the first model, the final model and the agreement chain on selection data (train + val); train
         the verifier (router_data -> SFT -> GRPO of the library, on a two-choice profile: accept the first
         model's answer, or escalate to the final model and pay both calls); choose its threshold on val at the
         agreement chain's energy share; score both chains once on test with a paired-bootstrap CI. Writes the
         figures' JSON (--out: no query text in it) and keeps the query-bearing files in --work (never commit).
  page:  write docs/cascade-verifier.md from that JSON (every figure in the page comes from it).

Example (the zeroeval-math study):
  .venv/bin/python scripts/verifier_study.py run --study-dir studies/zeroeval-math --models-dir artifacts/models \\
      --out benchmarks/results/cascade_verifier-zeroeval-math.json
  .venv/bin/python scripts/verifier_study.py page --out benchmarks/results/cascade_verifier-zeroeval-math.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the experiments package, when run as a file

DEFAULT_OUT = ROOT / "benchmarks/results/cascade_verifier-zeroeval-math.json"
DEFAULT_DOC = ROOT / "docs/cascade-verifier.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train the verifier and compare it with the agreement chain")
    run.add_argument("--study-dir", type=Path, required=True,
                     help="a study folder: params.yaml (its sft, grpo and router_data sections) and "
                          "artifacts/{profile,queries}.parquet")
    run.add_argument("--models-dir", type=Path, required=True, help="converted base models (the `models` stage's)")
    run.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the figures' JSON (default: %(default)s)")
    run.add_argument("--work", type=Path, default=ROOT / "artifacts/cascade_verifier",
                     help="router data, checkpoints, caches: they hold query text, keep them out of git "
                          "(default: %(default)s, git-ignored)")
    run.add_argument("--grpo-steps", type=int, default=None, help="cut GRPO's max_steps (default: the study's)")
    run.add_argument("--label-policy", choices=["expected_utility", "utility"], default=None,
                     help="router_data's labels (default: the study's router_data.label_policy); utility: the "
                          "realized outcome")
    page = sub.add_parser("page", help="write the page from the figures' JSON")
    page.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the figures' JSON (default: %(default)s)")
    page.add_argument("--doc", type=Path, default=DEFAULT_DOC, help="the page (default: %(default)s)")
    page.add_argument("--variant", type=Path, default=None, help="a second run's JSON (other labels), shown beside")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    if args.command == "run":
        from experiments.cascade_verifier.study import run_study, study_config

        figures = run_study(args.study_dir, args.models_dir, args.work, study_config(
            args.study_dir, args.grpo_steps, **({"label_policy": args.label_policy} if args.label_policy else {})))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
        test = figures["test"]
        low, high = test["accuracy_diff_verifier_minus_agreement_ci"] or (float("nan"), float("nan"))
        print(f"verifier {test['verifier']['accuracy']:.3f} vs agreement {test['agreement']['accuracy']:.3f}: "
              f"{test['accuracy_diff_verifier_minus_agreement']:+.3f} [{low:+.3f}, {high:+.3f}] ({test['verdict']}); "
              f"wrote {args.out}")
        return 0
    from experiments.cascade_verifier.page import render

    figures = json.loads(args.out.read_text())
    variant = json.loads(args.variant.read_text()) if args.variant else None
    args.doc.write_text(render(figures, source=_relative(args.out), variant=variant,
                               variant_source=_relative(args.variant) if args.variant else None))
    print(f"wrote {args.doc}")
    return 0


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
