"""The whole pipeline under real DVC, on a tiny local model: outputs, caching, partial reruns, MLflow.

Every test passes alone and in any order: the ``reproduced`` fixture runs `dvc repro` once on the shared
tiny repository, and a test that changes the repository (params, commits, experiments) works on a copy
(``scratch``) or puts back what it changed.
"""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
import yaml

from jouleroute.stages.table import stage_order
from jouleroute.training.partial_feedback import profiled_ids
from tests.pipeline.conftest import BIN, REPO, run
from tests.pipeline.dvc_helpers import (STAGES, edit_params, evidence_checkpoint, flat_keys, in_process, mlflow_client,
                                       ran, shard_rows, stage_runs, stale, store_rows)

pytestmark = [pytest.mark.timeout(1200), pytest.mark.integration]

LOGGED = [s for s in STAGES if s != "embedded_page"]  # it only rewrites documents: no MLflow run (README "MLflow")


@pytest.fixture(scope="module")
def reproduced(tiny_repo) -> set[str]:
    """`dvc repro` once on the shared tiny repository; the stages it ran."""
    return ran(run([str(BIN / "dvc"), "repro"], tiny_repo).stdout)


@pytest.fixture
def scratch(reproduced, tiny_repo, tmp_path):
    """A copy of the reproduced repository (git, DVC cache, outputs, MLflow store) that a test may change."""
    copy = tmp_path / "repo"
    shutil.copytree(tiny_repo, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_first_repro_runs_every_stage_and_writes_results(tiny_repo, reproduced):
    # (another test module may already have reproduced up to `validate` on this shared repository)
    assert {"router_data", "sft", "grpo", "budget", "evaluate", "embedded_page"} <= reproduced
    assert run([str(BIN / "dvc"), "status"], tiny_repo).stdout.strip().endswith("Data and pipelines are up to date.")
    queries = pd.read_parquet(tiny_repo / "artifacts/prepare/queries.parquet")
    profile = pd.read_parquet(tiny_repo / "artifacts/tournament/profile.parquet")
    assert set(profile["task"]) == {"gsm8k", "math500", "mmlu", "arc_challenge", "arc_easy", "hellaswag", "bbh"}
    assert not profile.duplicated(["query_id", "candidate_id"]).any()
    # tournament.train_fraction 0.5 (live GRPO): the tournament ran half of each task's train queries and every other query
    train = queries[queries["split"] == "train"]
    profiled = set(profiled_ids(train.to_dict("records"), 0.5, 0))
    assert len(profiled) < len(train)
    assert set(profile["query_id"]) == profiled | set(queries.loc[queries["split"] != "train", "query_id"])
    assert len(profile) == profile["query_id"].nunique() * 3
    # GRPO's live rollouts wrote their pairs into the live-pair cache, never into the tournament's shard store
    # (which holds exactly the profile's pairs), and `dvc status` above stayed clean
    # grpo cannot know the full train tournament of a train share (train.jsonl holds the profiled half): it says
    # so, and leaves the share to the budget stage, which completes that tournament
    bill = json.loads((tiny_repo / "artifacts/grpo/metrics.json").read_text())["profiling"]
    assert bill["share_of_full_train_tournament"] is None and "budget" in bill["full_train_tournament"]["why"]
    executed = json.loads((tiny_repo / "artifacts/grpo/executed_pairs.json").read_text())
    assert executed and all(q not in profiled and q in set(train["query_id"]) for q, _c in executed)
    assert {tuple(p) for p in executed} <= set(zip(store_rows(tiny_repo)["query_id"], store_rows(tiny_repo)["candidate_id"]))
    tournament = shard_rows(tiny_repo / "artifacts/tournament/shards")
    assert set(zip(tournament["query_id"], tournament["candidate_id"])) == set(zip(profile["query_id"],
                                                                                 profile["candidate_id"]))
    assert set(profile["energy_source"]) == {"estimated"}  # no GPU, no RAPL here: labelled estimate
    assert (profile["energy_j"] > 0).all()
    report = json.loads((tiny_repo / "artifacts/validate/report.json").read_text())
    assert report["success"] is True
    assert (tiny_repo / "artifacts/grpo/model/config.json").exists()
    metrics = json.loads((tiny_repo / "artifacts/evaluate/metrics.json").read_text())
    assert metrics
    plots = sorted((tiny_repo / "artifacts/evaluate/plots").glob("*.png"))
    assert len(plots) >= 3, plots  # accuracy-vs-energy, the λ sweep, the routing mix
    assert all(png.stat().st_size > 5_000 for png in plots)


def test_the_budget_curve_bills_the_pairs_and_reaches_the_report(tiny_repo, reproduced):
    """Stage `budget` (issue 19): every point's joules are the energies of its pairs; docs/embedded-default.md
    shows its table and plot."""
    curve = json.loads((tiny_repo / "artifacts/budget/budget.json").read_text())
    # the tournament profiled SFT's half of the train queries: the stage ran (or read) the other pairs for (a)@1
    queries = pd.read_parquet(tiny_repo / "artifacts/prepare/queries.parquet")
    store = store_rows(tiny_repo)
    train = store[store["query_id"].isin(set(queries.loc[queries["split"] == "train", "query_id"]))]
    assert train["query_id"].nunique() == (queries["split"] == "train").sum() and len(train) == 3 * train["query_id"].nunique()
    done = curve["completed_for_curve"]
    assert done["pairs"] == 3 * done["queries"] and done["executed_pairs"] <= done["pairs"]
    points = {p["name"]: p for p in curve["points"]}
    assert points["sft@1"]["profiling_j"] == pytest.approx(train["energy_j"].sum())
    assert points["sft@0.5"]["reused_pipeline_sft"] is True  # the deployed router's SFT
    assert points["sft@1"]["val_minus_full_sft"] == 0.0 and points["sft@1"]["test_utility"] is not None
    grpo = next(p for p in curve["points"] if p["recipe"] == "sft+grpo")
    revealed = json.loads((tiny_repo / f"artifacts/budget/routers/grpo-{grpo['fraction']:g}-k{grpo['k']}"
                                        "/revealed_pairs.json").read_text())
    energy = train.set_index(["query_id", "candidate_id"])["energy_j"]
    base = points[f"sft@{grpo['fraction']:g}"]["profiling_j"]
    assert grpo["profiling_j"] == pytest.approx(base + sum(energy[(q, c)] for q, c, _n in revealed))
    doc = (tiny_repo / "docs/embedded-default.md").read_text()
    assert "## Budget curve" in doc and "![Budget curve](embedded-default-budget.png)" in doc
    assert (tiny_repo / "docs/embedded-default-budget.png").stat().st_size > 5_000


def test_study_page_is_generated_from_the_run(tiny_repo, reproduced):
    """The page writer behind docs/replay-study.md, on this run's real evaluate + grpo outputs."""
    run([str(BIN / "jouleroute"), "study_page"], tiny_repo)
    text = (tiny_repo / "docs/replay-study.md").read_text()
    report = json.loads((tiny_repo / "artifacts/evaluate/report.json").read_text())
    for name in report["singles"]:
        assert f"| {name} |" in text
    assert "**oracle**" in text and "## Targets" in text
    assert "Every energy figure here is `estimated`" in text  # the profile's own label, not a typed one
    heldout = json.loads((tiny_repo / "artifacts/grpo/metrics.json").read_text())["heldout"]
    assert "## Held-out check" in text and f"routes {heldout['overall']['n']} (val query, λ) rows" in text
    assert "## Budget curve" in text and (tiny_repo / "docs/replay-study-budget.png").is_file()


def test_every_stage_run_is_in_mlflow_with_metrics_tags_and_plots(tiny_repo, reproduced):
    client = mlflow_client(tiny_repo)
    runs = stage_runs(client)
    assert set(LOGGED) <= set(runs), sorted(runs)
    for stage in LOGGED:
        tags = runs[stage].data.tags
        assert runs[stage].info.status == "FINISHED", stage
        assert tags["energy_source"] == ("none" if stage in ("prepare", "models") else "estimated"), stage
        assert tags["git_sha"] and tags["params_hash"], stage
    written = (tiny_repo / "artifacts/tournament/profile.parquet").stat().st_mtime * 1000  # before it logs
    assert runs["tournament"].info.start_time < written, "the run starts with the stage, not when it logs"
    tournament = runs["tournament"].data.metrics
    summary = json.loads((tiny_repo / "artifacts/tournament/summary.json").read_text())
    assert tournament["tiny-direct.accuracy"] == pytest.approx(summary["tiny-direct"]["accuracy"])  # same names
    assert "tiny-direct.energy_j_mean" in tournament
    assert "plots/accuracy_vs_energy.png" in {a.path for a in client.list_artifacts(runs["tournament"].info.run_id,
                                                                                     "plots")}
    validate = runs["validate"].data.metrics
    assert validate["expectations_passed"] > 0 and validate["expectations_failed"] == 0
    for stage in ("sft", "grpo"):
        metrics = runs[stage].data.metrics
        assert 0 <= metrics["heldout.overall.chosen_accuracy"] <= 1, stage
        assert metrics["heldout.overall.chosen_mean_energy_j"] > 0, stage
        assert "heldout.overall.label_accuracy" in metrics and "train_s" in metrics, stage
    evaluate = runs["evaluate"]
    full = json.loads((tiny_repo / "artifacts/evaluate/metrics.json").read_text())
    # the headline only, so the runs table can show it: each family's AIQ and λ*, no router's long tail (that is in
    # the router's child run and in the metrics.json artifact, under the same names)
    assert {f"families.{f}.aiq" for f in full["families"]} <= set(evaluate.data.metrics), sorted(evaluate.data.metrics)
    assert not any(k.startswith("routers.") for k in evaluate.data.metrics) and len(evaluate.data.metrics) <= 40
    assert any(k.startswith("lm:") for k in full["routers"])  # a swept router's name, as its child run is named
    assert "metrics.json" in {a.path for a in client.list_artifacts(evaluate.info.run_id)}
    compact = pd.json_normalize(json.loads((tiny_repo / "metrics.json").read_text()), sep=".").iloc[0]
    for key, value in compact.items():  # `dvc metrics show`'s numeric columns, under the same names in MLflow
        if not isinstance(value, str):  # names (the champion, the models, the verdict) are no metric
            assert evaluate.data.metrics[key] == pytest.approx(value), key
    assert evaluate.data.tags["energy_source"] == compact["source"]
    lam = yaml.safe_load((tiny_repo / "params.yaml").read_text())["router"]["lam"]
    assert float(evaluate.data.params["router.lam"]) == lam  # what `dvc exp run -S router.lam=...` changes
    plots = {a.path for a in client.list_artifacts(evaluate.info.run_id, "plots")}
    assert {"plots/lambda_sweep.png", "plots/phase_transition.png"} <= plots, plots  # the LM family's at top level
    families = client.search_runs([evaluate.info.experiment_id],
                                  filter_string=f"tags.mlflow.parentRunId = '{evaluate.info.run_id}' "
                                                "and tags.run_kind = 'family'")
    assert {r.data.tags["family"] for r in families} >= {"lm", "knn"}
    for fam in families:
        assert "plots/phase_transition.png" in {a.path for a in client.list_artifacts(fam.info.run_id, "plots")}
        assert "sweep.accuracy" in fam.data.metrics


def test_each_stage_run_logs_exactly_the_params_its_dvc_yaml_entry_lists(tiny_repo, reproduced):
    """The params of every stage's MLflow run are the keys of its dvc.yaml `params:` (what DVC reruns it for),
    read from the real store: no trainer or report adds its own."""
    from jouleroute.stages.context import StageContext
    from jouleroute.tracking import mlflow_keys

    ctx = StageContext.load(tiny_repo / "params.yaml", root=tiny_repo)
    runs = stage_runs(mlflow_client(tiny_repo))
    for stage in LOGGED:
        expected = mlflow_keys(ctx.logged_params(stage))
        assert runs[stage].data.params == {k: str(v)[:6000] for k, v in expected.items()}, stage


def test_the_router_is_registered_with_its_lambda_range_and_aiq(tiny_repo, reproduced):
    client = mlflow_client(tiny_repo)
    versions = client.search_model_versions("name = 'jouleroute-router'")
    assert versions
    latest = max(versions, key=lambda v: int(v.version))
    spec = json.loads((tiny_repo / "artifacts/router_data/router_spec.json").read_text())
    assert float(latest.tags["lambda_max"]) == max(spec["lambdas"])
    assert float(latest.tags["lambda_min"]) == min(spec["lambdas"])
    full = json.loads((tiny_repo / "artifacts/evaluate/metrics.json").read_text())
    assert float(latest.tags["aiq"]) == pytest.approx(full["families"]["lm"]["aiq"], abs=1e-3)
    assert latest.run_id == stage_runs(client)["grpo"].info.run_id


def test_the_champion_is_chosen_on_val_registered_and_reported(tiny_repo, reproduced):
    """The evaluate stage picks the best (family, checkpoint) on val and registers it under the alias
    `champion` (issue 18, item 4); `jouleroute serve` builds it (tests/gateway/test_champion.py)."""
    report = json.loads((tiny_repo / "artifacts/evaluate/report.json").read_text())
    selection = report["val_contest"]
    assert {"lm/sft", "knn", "mlp", "mf"} <= {c["name"] for c in selection["contenders"]}
    # evaluate.champion_by: iso_accuracy (the default): among the contenders tied with the best mean val utility,
    # the lowest val iso-accuracy energy share (no val point at that accuracy: 100%)
    assert selection["rule"] == "iso_accuracy"
    tied = [c for c in selection["contenders"] if c["name"] in selection["tied_on_utility"]]
    assert max(c["val_utility"] for c in selection["contenders"]) in {c["val_utility"] for c in tied}
    share = lambda c: 1.0 if c["iso_share_val"] is None else c["iso_share_val"]  # noqa: E731
    val_winner = selection.get("val_winner") or selection["winner"]  # the val contest's, before deployment
    winner = next(c for c in selection["contenders"] if c["name"] == val_winner["name"])
    assert winner in tied and share(winner) == min(share(c) for c in tied)
    # the champion saved and registered is the one deployed on selection data (evaluation/router_champion.py)
    assert selection["winner"]["name"] == report["deployed"]["champion"]
    # kNN evidence in the LM router was tried on val: every weight with either energy estimate
    evidence = selection["knn_evidence"]
    assert len(evidence["val_utility"]) == 8 and "0/first" in evidence["val_utility"]
    assert evidence["plain"] == (f"lm/{evidence_checkpoint(tiny_repo)}-knn" not in
                                 {c["name"] for c in selection["contenders"]})
    client = mlflow_client(tiny_repo)
    version = client.get_model_version_by_alias("jouleroute-champion", "champion")
    assert version.tags["family"] == selection["winner"]["family"]
    assert float(version.tags["val_utility"]) == pytest.approx(selection["winner"]["val_utility"])
    assert version.run_id == stage_runs(client)["evaluate"].info.run_id
    assert "## The champion, chosen on val" in (tiny_repo / "docs/embedded-default.md").read_text()


def test_where_summarizesstage_runs(tiny_repo, reproduced, monkeypatch, capfd):
    status, out, _ = in_process(tiny_repo, monkeypatch, capfd, "where")
    assert status == 0
    assert "latest run of each stage" in out and "AIQ" in out
    for stage in LOGGED:
        assert f"\n  {stage} " in out, stage
    assert max(len(line) for line in out.splitlines()) < 160
    assert "family" not in out  # router/family child runs are not listed
    assert "/runs?searchFilter=tags.run_kind%20%3D%20%27stage%27" in out  # the UI link opens the stage runs


def test_a_typo_in_params_fails_before_dvc_deletes_anything(tiny_repo, reproduced, monkeypatch, capfd):
    outputs = [tiny_repo / "artifacts/evaluate/report.json", tiny_repo / "metrics.json"]
    original = (tiny_repo / "params.yaml").read_text()
    edit_params(tiny_repo, lambda p: p["router"].update(lamb=0.5))
    try:
        status, out, err = in_process(tiny_repo, monkeypatch, capfd, "repro")
    finally:
        (tiny_repo / "params.yaml").write_text(original)
    assert status == 1
    assert "router.lamb: unknown key (did you mean 'lam'?)" in err
    assert "Traceback" not in err and "Running stage" not in out
    assert all(path.exists() for path in outputs)


def test_a_copied_clone_logs_mlflow_artifacts_inside_itself(tiny_repo, reproduced, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_repo, copy, ignore=shutil.ignore_patterns("models", "checkpoints", "shards"))
    run([str(BIN / "jouleroute"), "prepare"], copy)
    client = mlflow_client(copy)
    prepare = stage_runs(client)["prepare"]
    assert prepare.info.artifact_uri.startswith((copy / "mlruns").as_uri()), prepare.info.artifact_uri
    assert client.list_artifacts(prepare.info.run_id)
    evaluate = stage_runs(client)["evaluate"]  # logged in the original: now read from the copy
    assert evaluate.info.artifact_uri.startswith((copy / "mlruns").as_uri())
    assert client.list_artifacts(evaluate.info.run_id, "plots")


def test_second_repro_does_nothing(tiny_repo, reproduced):
    done = run([str(BIN / "dvc"), "repro"], tiny_repo)
    assert ran(done.stdout) == set(), done.stdout


def test_changing_lambda_makes_only_grpo_stale(tiny_repo, reproduced):
    original = (tiny_repo / "params.yaml").read_text()
    try:
        edit_params(tiny_repo, lambda p: p["grpo"].update(lambdas=[0.0, 0.5, 2.0]))
        # evaluate then follows through grpo's output; nothing upstream. `budget` trains GRPO points itself
        assert stale(tiny_repo) == {"grpo", "budget"}
    finally:
        (tiny_repo / "params.yaml").write_text(original)
    assert stale(tiny_repo) == set()


@pytest.mark.parametrize("key, value, expected", [
    ("norm", "log", {"router_data", "sft", "grpo", "budget", "evaluate"}),
    ("column", "energy_net_j", {"router_data", "budget", "evaluate"}),
    ("allow_mixed_sources", True, {"validate", "router_data", "budget", "evaluate"}),
])
def test_an_energy_policy_change_reruns_what_compares_joules_never_the_tournament(tiny_repo, reproduced, key, value,
                                                                                   expected):
    """energy_policy is a section apart from energy (the meter): a norm experiment must not re-measure."""
    original = (tiny_repo / "params.yaml").read_text()
    try:
        edit_params(tiny_repo, lambda p: p.setdefault("energy_policy", {}).update({key: value}))
        assert stale(tiny_repo) == expected
    finally:
        (tiny_repo / "params.yaml").write_text(original)
    assert stale(tiny_repo) == set()


def test_changing_one_candidate_reruns_only_that_candidate(scratch):
    tiny_repo = scratch
    before = pd.read_parquet(tiny_repo / "artifacts/tournament/profile.parquet")
    edit_params(tiny_repo, lambda p: p["pool"][0].update(max_new_tokens=4))
    assert stale(tiny_repo) == {"tournament", "embedded_page"}  # `embedded_page` lists `pool` among its params
    done = run([str(BIN / "dvc"), "repro", "tournament"], tiny_repo)
    assert ran(done.stdout) == {"tournament"}  # prepare and models are untouched
    # what reads the profile or its record (validate: run.json) itself; the rest follows when the labels change
    assert stale(tiny_repo) == {"labels", "validate", "budget", "evaluate", "embedded_page"}
    after = pd.read_parquet(tiny_repo / "artifacts/tournament/profile.parquet")
    changed = set(after.loc[~after["run_id"].isin(set(before["run_id"])), "candidate_id"])
    assert changed == {"tiny-direct"}  # the other candidates' shards were reused


def test_dvc_metrics_show_is_the_compact_headline(tiny_repo, reproduced):
    done = run([str(BIN / "dvc"), "metrics", "show"], tiny_repo)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 2, done.stdout  # one header, one row: metrics.json
    header, row = lines[0].split(), lines[1].split()
    assert header[0] == "Path" and row[0] == "metrics.json"
    # the deployed policy's decision figures and the best single's name (issue 50: the seven pipelines' rows fit a
    # terminal, ≤ 250 columns; intervals, AIQ and the cascades stay in artifacts/evaluate/metrics.json and the pages)
    assert {"dep.kind", "dep.name", "dep.acc", "dep.dacc", "dep.share", "dep.gain", "dep.verdict", "best", "oracle",
            "source", "hindsight_iso"} <= set(header), header
    assert not any("_ci" in h or h.startswith("aiq.") for h in header), header
    assert len(lines[0]) <= 250 and row[header.index("source")] == "estimated"
    assert "error" not in (done.stdout + done.stderr).lower()


def test_dvc_exp_show_compares_two_lambdas_readably(scratch):
    """The user's comparison: commit a run, `dvc exp run -S router.lam=...`, then the README's
    `dvc exp show --only-changed --drop '.*/.*'` (plain `dvc exp show` also lists every param and dependency
    hash, which DVC folds into "…" on any normal terminal; `--drop` removes the dependency-hash columns, whose
    names are paths). Which metrics move with λ depends on the tiny models' random answers, so the columns
    expected are exactly the metrics that differ between the two runs."""
    tiny_repo = scratch
    run(["git", "add", "-A"], tiny_repo)
    run(["git", "commit", "-qm", "baseline run"], tiny_repo)
    base = flat_keys(json.loads((tiny_repo / "metrics.json").read_text()))
    run([str(BIN / "dvc"), "exp", "run", "-S", "router.lam=2.0", "-n", "lam-2"], tiny_repo)
    after = flat_keys(json.loads((tiny_repo / "metrics.json").read_text()))  # the experiment's results, in the workspace
    assert set(after) == set(base)
    differs = {key for key in base if base[key] != after[key]}
    env = {"COLUMNS": "120"}
    show = [str(BIN / "dvc"), "exp", "show", "--no-pager", "--only-changed", "--drop", ".*/.*"]
    changed = run(show, tiny_repo, env=env).stdout
    lines = [line for line in changed.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 120, changed
    assert "…" not in changed, changed  # nothing folded
    header = next(line for line in lines if "Experiment" in line).split()
    lam = next(name for name in header if name.split(":")[-1] == "router.lam")  # `params.yaml:` may prefix it
    assert not any("/" in name for name in header if name != lam), changed  # no dependency hashes
    assert set(header) & set(base) == differs, (differs, changed)  # what moved, and only that
    cells = lambda row: row.split()[len(row.split()) - len(header):]
    exp_row = next(line for line in lines if "lam-2" in line)
    main_row = next(line for line in lines if "master" in line or " main " in line)
    assert (float(cells(main_row)[header.index(lam)]), float(cells(exp_row)[header.index(lam)])) == (0.5, 2.0), changed
    for key in differs:  # DVC prints up to 5 significant digits
        column = header.index(key)
        for row, metrics in ((main_row, base), (exp_row, after)):
            value = cells(row)[column]
            assert value == str(metrics[key]) or float(value) == pytest.approx(float(metrics[key]), rel=1e-4), (key, changed)


def test_the_default_remote_pushes_and_a_fresh_clone_pulls(scratch):
    """The project's `.dvc/config` (a folder beside the clone) makes `dvc push` / `dvc pull` work as shipped."""
    tiny_repo = scratch
    shutil.copy2(REPO / ".dvc/config", tiny_repo / ".dvc/config")
    run([str(BIN / "dvc"), "push"], tiny_repo)
    assert any((tiny_repo.parent / "jouleroute-dvc-remote").rglob("*")), "nothing reached the default remote"
    run(["git", "add", "-A"], tiny_repo)
    run(["git", "commit", "-qm", "results and the default remote"], tiny_repo)
    clone = tiny_repo.parent / "clone"  # beside the original: the same relative remote
    run(["git", "clone", "-q", str(tiny_repo), str(clone)], tiny_repo.parent)
    run([str(BIN / "dvc"), "pull"], clone)
    for output in ("artifacts/prepare/queries.parquet", "artifacts/tournament/profile.parquet",
                   "artifacts/grpo/model/config.json"):
        assert (clone / output).read_bytes() == (tiny_repo / output).read_bytes(), output
    assert "in sync" in run([str(BIN / "dvc"), "status", "--cloud"], clone).stdout  # nothing left to push
    # every output but the converted models (not cached: regenerated from the pinned packages) came back,
    # so the pulled clone recomputes nothing else
    rerun = run([str(BIN / "dvc"), "repro"], clone).stdout
    assert ran(rerun) <= {"models"} and "Running stage 'embedded_page'" not in rerun, rerun
