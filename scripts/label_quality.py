"""How good labels without gold are on a pool that has gold: per task, precision and recall of "correct" and the
agreement of the labels with gold, each with a 95% query-bootstrap CI (jouleroute/labels/quality.py).

Reads a study's profile (its params' ``paths.profile``), or ``--profile``. When the study has not run,
a public-pool study's profile is built in a temporary folder by its own `outcomes` stage (the pool's reader, the
import and the pool rule, tracking off); nothing is written into the study. Labels are computed with
``labels.source: reference`` (``--reference``, the reference's own rows reported apart since they are correct by
definition) and with ``vote``.

    .venv/bin/python scripts/label_quality.py --params studies/<study>/params.yaml (or --profile P) \
        --reference <candidate> [--splits train,val] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def study_profile(params_path: Path | None, profile: Path | None) -> tuple[pd.DataFrame, str]:
    if profile is not None:
        return pd.read_parquet(profile), str(profile)
    from jouleroute.config import load_params

    params = load_params(params_path)
    path = ROOT / params.paths.profile
    if path.exists():
        return pd.read_parquet(path), params.paths.profile
    if params.public_pool is None:
        raise SystemExit(f"{path}: no profile; run the study first (`jouleroute --params {params_path} repro`)")
    return _built_profile(params, params_path), f"built by the `outcomes` stage of {params_path} in a temporary folder"


def _built_profile(params, params_path: Path) -> pd.DataFrame:
    from jouleroute.stages.context import StageContext
    from jouleroute.stages.outcomes import outcomes_stage

    with tempfile.TemporaryDirectory() as tmp:
        paths = {name: f"{tmp}/{name}" for name in ("queries", "profile", "profile_meta", "tournament_summary")}
        params = params.model_copy(update={
            "paths": params.paths.model_copy(update=paths),
            "tracking": params.tracking.model_copy(update={"enabled": False}),
            "public_pool": params.public_pool.model_copy(update={"table": f"{tmp}/outcomes.parquet"})})
        outcomes_stage(StageContext(params, ROOT, params_path))
        return pd.read_parquet(paths["profile"])


def quality_rows(gold: pd.DataFrame, source: str, reference: str | None) -> list[dict]:
    from jouleroute.labels.config import LabelsConfig
    from jouleroute.labels.policies import apply_labels
    from jouleroute.labels.quality import label_quality

    labelled = apply_labels(gold, LabelsConfig(source=source, reference=reference))
    scopes = {"all candidates": labelled.profile}
    if reference:
        scopes[f"without {reference}"] = labelled.profile[labelled.profile["candidate_id"] != reference]
    rows = []
    for scope, labels in scopes.items():
        quality = label_quality(labels, gold)
        for task, figures in [*quality["by_task"].items(), ("all", quality["overall"])]:
            rows.append({"labels": f"reference:{reference}" if reference else source, "scope": scope, "task": task,
                         **{k: v for k, v in figures.items() if k != "by_candidate"},
                         "unlabelled_by_reason": labelled.summary["by_task"].get(task, labelled.summary)[
                             "unlabelled_by_reason"]})
    return rows


def _figure(value: float | None, ci: list | None) -> str:
    return "n/a" if value is None else f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def table(rows: list[dict]) -> str:
    lines = ["| labels | rows | task | labelled rows (queries) | precision [95% CI] | recall [95% CI] | "
             "agreement [95% CI] |", "|---|---|---|---:|---|---|---|"]
    for r in rows:
        lines.append(f"| `{r['labels']}` | {r['scope']} | {r['task']} | {r['labelled_rows']}/{r['rows']} "
                     f"({r['labelled_queries']}/{r['queries']}) | {_figure(r['precision'], r['precision_ci'])} | "
                     f"{_figure(r['recall'], r['recall_ci'])} | {_figure(r['agreement'], r['agreement_ci'])} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--params", type=Path, help="a study's params.yaml: its profile, or one built for it")
    source.add_argument("--profile", type=Path, help="a profile graded on gold")
    parser.add_argument("--reference", help="the reference candidate of the reference labels")
    parser.add_argument("--splits", default="train,val,test", help="the splits scored (comma-separated)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    gold, origin = study_profile(args.params, args.profile)
    gold = gold[gold["split"].isin(args.splits.split(","))].reset_index(drop=True)
    candidates = sorted(gold["candidate_id"].unique())
    print(f"profile: {origin}; splits {args.splits}: {gold['query_id'].nunique()} queries x {len(candidates)} "
          f"candidates ({', '.join(candidates)})")
    rows = [*(quality_rows(gold, "reference", args.reference) if args.reference else []),
            *quality_rows(gold, "vote", None)]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"profile": origin, "splits": args.splits, "candidates": candidates,
                                         "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
