"""Write the no-gold study presets (studies/nogold-*/): a pool's pipeline trained on labels without gold answers.

Each preset reads another pipeline's profile (its tournament's or outcome import's, graded on gold) and runs the
stages after it with ``labels.source`` set to a reference model or a vote: the policy is trained and chosen on
those labels, and evaluate scores its test split on gold (labels/scoring.py). Its page shows the labels'
agreement with gold per task and the deployed policy beside the gold-trained pipeline's (README's `no-gold` table,
scripts/doc_figures.py). The presets (issue 48):

- ``nogold-zeroeval-math-reference``: zeroeval-math labelled by agreement with llama-3.1-405b's answers;
- ``nogold-zeroeval-math-vote``: zeroeval-math labelled by the pool's plurality answer;
- ``nogold-replay-vote``: the replay pool by vote (its ARC and Winogrande answers compare; MBPP's code does not,
  so its queries are left out of training and still scored on gold);
- ``nogold-embedded-reference``: the embedded default labelled by its best single on selection data (the root
  metrics.json's ``best``); its tournament profiles every train query (a vote or a reference needs every
  candidate's answer), resuming the main tournament's shard store, so only the missing pairs run.

**The target under reference labels.** A reference's own answers are correct by definition, so on selection data
it is the best single at accuracy 1.0, and the default target (iso-accuracy: within ``evaluate.accuracy_tolerance``
of the best single's selection accuracy) asks a policy to agree with the reference on 99% of the queries: it
measures agreement with one model, not accuracy, and leaves nothing cheaper than the reference to deploy (issue
48 measured 90% of the 405B's energy that way). A user without gold states a budget instead: the reference presets
set ``router.target.energy_share`` to ``REFERENCE_BUDGET``, the 80% of the reference's energy issue 48 asks about,
and evaluate chooses the policy that meets it on the label-trained selection data; gold test then says whether
that policy is non-inferior. Vote presets keep the default (the plurality answer is no single model's).

    .venv/bin/python scripts/no_gold_studies.py [--check]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from heldout_studies import sync_presets  # noqa: E402  (the same write-or-check loop)

# the inputs a preset reads from its base pipeline (never writes)
INPUTS = ("data_root", "data_manifest", "data_dir", "queries", "models_dir", "shards_dir", "live_pairs_dir",
          "profile", "profile_meta", "tournament_summary", "embedding_cache", "trunk_cache")
PRODUCERS = ("prepare", "models", "tournament", "outcomes", "replay", "embedded_page")  # the base's own stages
# the budget curve (what profiling a share of the train queries buys) is its base pipeline's question, not what the
# labels cost; it is also a study's dearest stage: a preset leaves it out, and its page has no budget section
LEFT_OUT = ("budget",)


REFERENCE = "llama-3.1-405b"  # the strongest model of the public math pool: its study is found by it
REFERENCE_BUDGET = 0.8  # router.target.energy_share of the reference presets (module doc)


def _study_with(candidate: str) -> str:
    """The public pool study (jouleroute/replay/pools/, where a pool is named once) whose models include
    ``candidate``."""
    from jouleroute.replay.pools import public_pools

    return next(pool.study for pool in public_pools().values()
                if any(m.get("candidate_id") == candidate for m in pool.models.values()))


def presets() -> dict[str, dict]:
    best = json.loads((ROOT / "metrics.json").read_text())["best"]
    math = _study_with(REFERENCE)
    return {
        f"nogold-{math}-reference": {"base": math, "labels": {"source": "reference", "reference": REFERENCE}},
        f"nogold-{math}-vote": {"base": math, "labels": {"source": "vote"}},
        "nogold-replay-vote": {"base": "replay", "labels": {"source": "vote"}},
        "nogold-embedded-reference": {"base": None, "labels": {"source": "reference", "reference": best}},
    }


def _base_files(base: str | None) -> tuple[dict, dict]:
    folder = ROOT / "studies" / base if base else ROOT
    return yaml.safe_load((folder / "params.yaml").read_text()), yaml.safe_load((folder / "dvc.yaml").read_text())


def _own(value: str, base: str | None, name: str) -> str:
    """An output path of the base pipeline moved into the preset's folder."""
    if base:
        return value.replace(f"studies/{base}/", f"studies/{name}/")
    return f"studies/{name}/{value}" if value.startswith("artifacts/") else value


def render_params(name: str, preset: dict) -> dict:
    base = preset["base"]
    params, _ = _base_files(base)
    paths = params["paths"]
    from jouleroute.paths import PathsConfig

    for key, default in PathsConfig().model_dump().items():
        value = paths.get(key, default)
        if value is not None:
            paths[key] = value if key in INPUTS else _own(value, base, name)
    paths |= {"mlflow_db": f"mlruns/{name}/mlflow.db", "study_doc": f"docs/{name}-study.md",
              "headline": f"studies/{name}/metrics.json",
              "gold_headline": f"studies/{base}/metrics.json" if base else "metrics.json"}
    params["labels"] = {**params["labels"], **preset["labels"]}
    if preset["labels"]["source"] == "reference":  # iso-accuracy would ask for agreement with it (module doc)
        params["router"] = {**params["router"], "target": {"energy_share": REFERENCE_BUDGET}}
    params["tracking"] = {**params.get("tracking", {}), "experiment": f"jouleroute-{name}"}
    if base is None:  # every train query profiled: labels need every candidate's answer; GRPO replays them
        params["tournament"]["train_fraction"] = 1.0
        params["grpo"]["reward_source"] = "profile"
    return params


def render_dvc(name: str, preset: dict) -> dict:
    from jouleroute.commands.prompts_init import PAGE_STAGE, as_study, page_stage

    base = preset["base"]
    _, dvc = _base_files(base)
    keep = {k: v for k, v in dvc["stages"].items()
            if k not in PRODUCERS + LEFT_OUT or (base is None and k == "tournament")}
    keep.setdefault(PAGE_STAGE, page_stage(ROOT))
    keep[PAGE_STAGE] = {**keep[PAGE_STAGE], "deps": [d for d in keep[PAGE_STAGE]["deps"] if "budget_dir" not in d]
                        + ["${paths.gold_headline}"]}  # the gold-trained point the page shows beside its own
    out = as_study(keep, f"studies/{name}/params.yaml", "../..")
    if base is None:  # the preset's own tournament writes its own profile; the shard store is the main one's
        out["tournament"]["outs"] = ["${paths.profile}", "${paths.profile_meta}", "${paths.tournament_summary}"]
    return {"stages": out}


def render(name: str, preset: dict) -> dict[Path, str]:
    what = f"studies/{preset['base']}" if preset["base"] else "the main pipeline"
    header = (f"# GENERATED by scripts/no_gold_studies.py from {what}: edit that or the script, then rerun it.\n"
              f"# No-gold preset: {what}'s pool trained on labels {preset['labels']} and scored on gold test.\n"
              f"#   .venv/bin/jouleroute --params studies/{name}/params.yaml repro\n")
    params, dvc = render_params(name, preset), render_dvc(name, preset)
    if preset["base"] is None:
        own = {k: f"studies/{name}/artifacts/tournament/{Path(v).name}"
               for k, v in params["paths"].items() if k in ("profile", "profile_meta", "tournament_summary")}
        params["paths"] |= own
    dump = lambda d: yaml.safe_dump(d, sort_keys=False, width=115, allow_unicode=True)  # noqa: E731
    folder = ROOT / "studies" / name
    return {folder / "params.yaml": header + "\n" + dump(params), folder / "dvc.yaml": header + "\n" + dump(dvc)}


def main() -> int:
    files = {p: t for name, preset in presets().items() for p, t in render(name, preset).items()}
    return sync_presets(files, "scripts/no_gold_studies.py")


if __name__ == "__main__":
    sys.exit(main())
