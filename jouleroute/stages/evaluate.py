"""Stage `evaluate`: accuracy vs energy for routers, baselines, oracle; the champion, chosen on val.

On the test split: every single candidate, random, oracle, kNN/MLP/MF baselines and the LM
router over the lambda sweep; AIQ, APGR, savings captured, phase transition, the LM router's
paired-bootstrap CI against each baseline, plots, MLflow. On val only: the router to deploy
(family and checkpoint), saved as fitted with the deployed λ (`router.lam`) in `evaluate_dir/champion/`
(what `jouleroute serve` loads) and registered in MLflow under the alias `champion`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd

from jouleroute.energy import make_meter
from jouleroute.evaluation import RouterRun, run_evaluate
from jouleroute.evaluation.headline import LM_ALONE, headline  # LM_ALONE: the LM router without kNN evidence
from jouleroute.evaluation.mlflow_log import flatten
from jouleroute.evaluation.overhead import cache_key, stable_overhead
from jouleroute.evaluation.selection import read_val_rows, val_queries
from jouleroute.routing.blend import blend_scores
from jouleroute.routing.champion import clear_champion, save_champion
from jouleroute.routing.families import get_family, learned_families
from jouleroute.routing.registry import build_router, candidate_order, sample_train
from jouleroute.routing.scores import Scores
from jouleroute.routing.baselines.simple import mix_of
from jouleroute.stages.context import StageContext
from jouleroute.stages.training import grpo_run
from jouleroute.tracking import StageRun, tag_router_version

logger = logging.getLogger(__name__)


# Inputs of dvc.yaml the stage can do without (the CLI checks the others first): without a trained LM
# router, evaluate scores the baselines alone; without val rows, no champion is chosen.
OPTIONAL_INPUTS = ("grpo_dir", "sft_dir", "router_data_dir")


def evaluate_stage(ctx: StageContext):
    """The stage opens its one MLflow run (failed if the body raises) and hands it to the code that logs."""
    with ctx.stage_run("evaluate") as run:  # params: what dvc.yaml says evaluate depends on
        return _evaluate(ctx, run)


def _evaluate(ctx: StageContext, run: StageRun | None):
    p = ctx.params
    profile = pd.read_parquet(ctx.path("profile"))
    queries = pd.read_parquet(ctx.path("queries"))
    candidates = candidate_order(profile, p.candidate_ids, p.profile_source)
    split = p.evaluate.split
    queries = _sample_split(queries, split, p.evaluate.max_queries, p.evaluate.seed)
    test_queries = queries[queries["split"] == split].sort_values("query_id").reset_index(drop=True)
    meter = make_meter(p.energy)  # the routers' own overhead is measured with the tournament's meters
    lambdas = list(p.evaluate.lambdas)
    runs: list[RouterRun] = []

    lm_scores = None
    lm_router = _lm_router(ctx, meter)
    if lm_router is not None:  # every router the same way: score once, decide at each λ
        lm_scores = lm_router.score(test_queries, progress=ctx.progress(len(test_queries), "LM routing"))
        lm_scores = stable_overhead(lm_scores, _lm_overhead_key(ctx, lm_router, meter), overhead_cache(ctx))
    baselines = p.baselines.model_copy(update={"embedding": p.baselines.embedding.model_copy(
        update={"cache_dir": str(ctx.path("embedding_cache"))})})
    learned = [family for family in learned_families() if family in baselines.families]
    tick = ctx.progress(len(learned), "baselines (embed, fit, route)") if learned else None
    fitted, test_scores = {}, {}
    for family in learned:
        train_profile = sample_train(profile, baselines)
        router = fitted[family] = build_router(family, train_profile, queries, candidates, baselines,
                                               meter=meter, energy=p.energy_policy, lam=p.router.lam)
        settings = {"baselines": p.baselines.model_dump(mode="json"),
                    "train_rows": len(train_profile)}
        key = cache_key(family, settings, meter.source, meter.device_info())
        test_scores[family] = stable_overhead(router.score(test_queries), key, overhead_cache(ctx))
        tick(1)
    on_train = baselines.train_split == "train"  # a baseline fitted on another split has seen val: no contender
    val_rows = read_val_rows(ctx.path("router_data_dir") / "val.jsonl")
    energy_report = None
    if baselines.query_energy == "auto" and val_rows and on_train:  # ê_c(x) where val utility says so
        routers = dict(fitted) | ({"lm": lm_router} if lm_router is not None else {})
        adopted, energy_report, predicted = per_query_energy(ctx, routers, profile, queries, val_rows, candidates,
                                                             test_queries)
        for family, router in adopted.items():
            if router is routers[family]:
                continue
            if family == "lm":
                lm_router, lm_scores = router, lm_scores.with_energy(predicted[lm_scores.candidates].to_numpy(),
                                                                     p.energy_policy.norm)
            else:
                fitted[family] = router
                test_scores[family] = test_scores[family].with_energy(
                    predicted[test_scores[family].candidates].to_numpy(), p.energy_policy.norm)
    for family in learned:
        runs += _swept_runs(family, test_scores[family], lambdas)
    evidence = knn_evidence(ctx, lm_router, fitted.get("knn") if on_train else None, val_rows)
    lm_runs, lm_alone = [], lm_scores
    if lm_scores is not None:
        if evidence and not evidence["plain"]:  # the LM router alone stays in the report, for comparison
            runs += _swept_runs(LM_ALONE, lm_scores, lambdas)
            lm_scores = blend_scores(lm_scores, test_scores["knn"], evidence["weight"], evidence["energy"])
        lm_runs = _swept_runs("lm", lm_scores, lambdas)
        runs += lm_runs
    selection = select_champion(ctx, fitted if on_train else {}, val_rows, evidence, energy_report)
    if selection:  # the champion's val sweep: the λ that meets router.target (and `serve --target-*`)
        selection["target"] = champion_target(ctx, selection, lm_router, fitted, val_rows, profile, queries)
        if selection["target"] is None and p.router.target is not None:
            logger.warning("router.target is set but the champion %s cannot be scored here (no such router was "
                           "fitted or loaded): no λ is chosen for it", selection["winner"]["name"])
        if energy_report is not None:
            selection["query_energy"] = energy_report
    reference = _reference_run(lm_runs, p.router.lam)
    mix = mix_of(reference.decisions) if reference else None  # the random rule's: the LM router's mix
    for rule in [f for f in baselines.families if get_family(f).router.reference_rule]:  # random, task_best
        router = build_router(rule, profile, queries, candidates, baselines, mix=mix, energy=p.energy_policy)
        runs.append(RouterRun(rule, rule, None, router.route(test_queries)))
    logger.info("evaluating %d router runs on %d %s queries", len(runs), len(test_queries), split)
    result = run_evaluate(profile, queries, runs, p.evaluate, ctx.path("evaluate_dir"), run_tags=ctx.tags("evaluate"),
                          run=run, selection=selection, energy=p.energy_policy)
    write_headline(ctx, result, run)
    champion_dir = save_champion_artifact(ctx, selection, fitted, test_scores, (lm_router, lm_alone, lm_scores),
                                          evidence, test_queries, result.mlflow_run_id)
    register(ctx, selection, result.mlflow_run_id, champion_dir)
    if lm_runs and result.mlflow_run_id:
        family = result.metrics["families"].get("lm", {})
        tag_router_version(ctx.tracking_uri, p.tracking.experiment, grpo_run(ctx).get("router_version"),
                          {"aiq": family.get("aiq", "n/a"), "lambda_star": family.get("lambda_star", "n/a"),
                           "evaluate_run_id": result.mlflow_run_id})
    logger.info("evaluation written to %s", ctx.path("evaluate_dir"))
    return result


def knn_evidence(ctx: StageContext, lm_router, knn, val_rows: list[dict]) -> dict | None:
    """How much of kNN's neighbour evidence the LM router uses, chosen on val (evaluation/knn_evidence.py);
    ``None`` when there is no LM router, no kNN fitted on train, no val rows or no weight to try."""
    weights = ctx.params.evaluate.knn_evidence_weights
    if lm_router is None or knn is None or not val_rows or not any(w > 0 for w in weights):
        return None
    from jouleroute.evaluation.knn_evidence import choose_knn_evidence

    asked = val_queries(val_rows)
    lm_val = lm_router.score(asked, progress=ctx.progress(len(asked), "LM routing (val: kNN evidence)"))
    meter, knn.meter = getattr(knn, "meter", None), None  # decisions count here; its cost is metered on test
    try:
        knn_val = knn.score(asked)
    finally:
        knn.meter = meter
    return choose_knn_evidence(lm_val, knn_val, val_rows, ctx.params.energy_policy.norm, weights)


def select_champion(ctx: StageContext, baselines: dict, val_rows: list[dict], evidence: dict | None,
                    energy_report: dict | None = None) -> dict | None:
    """The router to deploy, chosen on val among the LM checkpoints, the LM router with kNN evidence (its
    cross-fitted val figure), the LM router with per-query energy when it adopted it (its cross-fitted val
    figure) and the ``baselines`` fitted on train (evaluation/selection.py); test plays no part."""
    from jouleroute.evaluation.selection import Contender, choose
    from jouleroute.routing.lm.spec import format_lambda

    extra = []
    lm_energy = ((energy_report or {}).get("families") or {}).get("lm") or {}
    if lm_energy.get("adopted") and not (evidence and not evidence["plain"]):
        model_dir = lm_router_dir(ctx)
        shown = model_dir.relative_to(ctx.root) if model_dir.is_relative_to(ctx.root) else model_dir
        cross = lm_energy["cross_fitted"]
        by_lambda = {format_lambda(lam): u for lam, u in cross["by_lambda"].items()}
        extra.append(Contender("lm", f"{_kept_checkpoint(ctx)}+query-energy", by_lambda, str(shown),
                               per_query=cross.get("per_query_utility"), points=_points(cross, format_lambda)))
    if evidence and not evidence["plain"] and evidence["cross_fitted"]["by_lambda"]:
        kept = _kept_checkpoint(ctx)
        model_dir = lm_router_dir(ctx)
        shown = model_dir.relative_to(ctx.root) if model_dir.is_relative_to(ctx.root) else model_dir
        extra.append(Contender("lm", f"{kept}-knn", evidence["cross_fitted"]["by_lambda"], str(shown),
                               knn_evidence={"weight": evidence["weight"], "energy": evidence["energy"]},
                               per_query=evidence["cross_fitted"].get("per_query_utility"),
                               points=_points(evidence["cross_fitted"], str)))
    selection = choose(val_rows, ctx.path("grpo_dir") / "metrics.json",
                       {"sft": ctx.path("sft_dir") / "model", "grpo": lm_router_dir(ctx)}, baselines,
                       ctx.params.energy_policy.norm, ctx.root, extra, rule=ctx.params.evaluate.champion_by,
                       tolerance=ctx.params.evaluate.accuracy_tolerance)
    if selection is not None and evidence is not None:
        selection["knn_evidence"] = evidence
    if selection and ctx.tracking_uri:
        from jouleroute.tracking import CHAMPION_ALIAS, champion_name

        selection |= {"registered_model": champion_name(ctx.params.tracking.experiment), "alias": CHAMPION_ALIAS}
    return selection


def _points(cross_fitted: dict, key) -> dict[str, tuple[float, float]] | None:
    """λ -> (accuracy, J/query) of a cross-fitted val figure's held-out choices; ``None`` for an older output."""
    points = cross_fitted.get("points")
    return {key(lam): (float(a), float(j)) for lam, (a, j) in points.items()} if points else None


def per_query_energy(ctx: StageContext, routers: dict, profile: pd.DataFrame, queries: pd.DataFrame,
                     val_rows: list[dict], candidates: list[str], test_queries: pd.DataFrame):
    """Fit ê_c(x) on train (routing/baselines/query_energy.py), measure it on val against the task mean, and wrap
    each router whose mean val utility it raises (evaluation/query_energy.py). Returns (routers, report, ê on
    test as a frame with one column per candidate)."""
    from jouleroute.evaluation.outcomes import build_matrix
    from jouleroute.evaluation.query_energy import adopt_on_val
    from jouleroute.routing.baselines.embeddings import build_embedder
    from jouleroute.routing.baselines.query_energy import QueryEnergyModel

    p = ctx.params
    embedding = p.baselines.embedding.model_copy(update={"cache_dir": str(ctx.path("embedding_cache"))})
    model = QueryEnergyModel(candidates, build_embedder(embedding), seed=p.baselines.seed,
                             strip_scaffold=p.baselines.strip_scaffold)
    model.fit(profile, queries, energy_column=p.energy_policy.column, split=p.baselines.train_split)
    asked = val_queries(val_rows)
    matrix = build_matrix(profile, queries[queries["query_id"].isin(set(asked["query_id"]))], "val",
                          p.energy_policy.column)
    lambdas = sorted({float(r["lam"]) for r in val_rows})  # the trained λ grid, as the champion's contest
    train = profile[profile["split"] == p.baselines.train_split]
    adopted, report = adopt_on_val(routers, model, asked, matrix, train, p.energy_policy.column, lambdas,
                                   p.energy_policy.norm)
    logger.info("per-query energy on val: relative error %.3f (task mean %.3f); adopted by %s",
                report["energy_error_val"]["per_query"]["relative_error"],
                report["energy_error_val"]["task_mean"]["relative_error"],
                [f for f, row in report["families"].items() if row["adopted"]] or "no family")
    return adopted, report, pd.DataFrame(model.predict(test_queries), columns=model.candidates)


def champion_target(ctx: StageContext, selection: dict, lm_router, fitted: dict, val_rows: list[dict],
                    profile: pd.DataFrame, queries: pd.DataFrame) -> dict | None:
    """The champion's accuracy and models' J/query on val at each λ of ``evaluate.lambdas``, and the λ that meets
    ``router.target`` there (evaluation/target.py); ``None`` when the champion cannot be scored here."""
    from jouleroute.evaluation.outcomes import build_matrix
    from jouleroute.evaluation.target import choose_on_val, val_sweep

    win = selection["winner"]
    asked = val_queries(val_rows)
    if win["family"] in fitted:
        router = fitted[win["family"]]
        meter, router.meter = getattr(router, "meter", None), None  # decisions count here, not its cost
        try:
            scores = router.score(asked)
        finally:
            router.meter = meter
    elif win["family"] == "lm" and lm_router is not None:
        model_dir = ctx.root / win["model_dir"] if win.get("model_dir") else lm_router_dir(ctx)
        router = lm_router
        if Path(model_dir).resolve() != Path(lm_router.model_dir).resolve():  # the sft checkpoint won
            from jouleroute.routing.lm.router import LMRouter

            router = LMRouter(Path(model_dir), cfg=ctx.params.router)
        scores = router.score(asked, progress=ctx.progress(len(asked), "LM routing (val: target λ)"))
        weight = (win.get("knn_evidence") or {}).get("weight")
        if weight and "knn" in fitted:
            scores = blend_scores(scores, fitted["knn"].score(asked), weight, win["knn_evidence"]["energy"])
    else:
        return None
    chosen = queries[queries["query_id"].isin(set(asked["query_id"]))]
    m = build_matrix(profile, chosen, "val", ctx.params.energy_policy.column)
    return choose_on_val(ctx.params.router.target, val_sweep(m, scores, list(ctx.params.evaluate.lambdas)))


def save_champion_artifact(ctx: StageContext, selection: dict | None, fitted: dict, test_scores: dict,
                           lm: tuple, evidence: dict | None, test_queries: pd.DataFrame,
                           run_id: str | None) -> Path | None:
    """The chosen router as fitted, with the deployed λ (``router.lam``) and its val sweep (where
    ``router.target`` finds its λ), in ``evaluate_dir/champion`` (routing/champion.py), and its test decisions
    at that λ when it was scored on test. ``lm``: the LM router, its scores alone and with kNN evidence."""
    from jouleroute.routing.baselines.query_energy import PerQueryEnergy

    folder = ctx.path("evaluate_dir") / "champion"
    if not selection:
        clear_champion(folder, "no champion chosen: no val rows (router_data's val.jsonl) or no contender")
        return None
    p, win = ctx.params, selection["winner"]
    lam, family = p.router.lam, win["family"]
    lm_router, lm_alone, lm_blended = lm
    record = {"family": family, "checkpoint": win["checkpoint"], "name": win["name"], "lam": lam,
              "lambda_range": [min(p.router_data.lambdas), max(p.router_data.lambdas)],
              "model_dir": win["model_dir"], "knn_evidence": win.get("knn_evidence"),
              "val_utility": win["val_utility"], "evaluate_run_id": run_id,
              "val_sweep": (selection.get("target") or {}).get("val_sweep"),
              "embedding": p.baselines.embedding.model_dump(mode="json") | {"cache_dir": None}}
    parts, scores = {}, None  # what the gateway assembles: key -> the fitted router
    if family in fitted:
        parts["router"], scores = fitted[family], test_scores[family]
    elif family == "lm":
        if win.get("knn_evidence"):
            parts["knn"] = fitted["knn"]
        uses_energy = champion_query_energy(selection)
        if uses_energy and isinstance(lm_router, PerQueryEnergy):
            parts["lm"] = lm_router  # only its per-query energy is saved: the checkpoint is model_dir
        blended = bool(evidence and not evidence["plain"])
        same = win["checkpoint"].startswith(_kept_checkpoint(ctx)) and bool(win.get("knn_evidence")) == blended
        if same and uses_energy == isinstance(lm_router, PerQueryEnergy):
            scores = lm_blended if blended else lm_alone  # the LM router evaluate scored on test
    saved, with_energy = {}, []
    for key, router in parts.items():
        if isinstance(router, PerQueryEnergy):  # saved apart: the router, and the one ê model it decides with
            saved["query_energy"], router = router.model, router.inner
            with_energy.append(key)
        if key != "lm":
            saved[key] = router
    record["query_energy"] = with_energy  # the parts that decide with per-query energy
    decisions = None
    if scores is not None:
        chosen = scores.decide(lam)
        decisions = pd.DataFrame({"query_id": chosen.query_ids, "candidate_id": chosen.candidate_ids})
    logger.info("champion %s saved with λ=%g in %s", win["name"], lam, folder)
    return save_champion(folder, record, saved, decisions)


def champion_query_energy(selection: dict) -> bool:
    """Whether the champion decides with per-query energy: its family adopted it on val, and for the LM router
    the contender that won was scored with it (its own ``+query-energy`` one, or the kNN blend)."""
    win = selection["winner"]
    adopted = ((selection.get("query_energy") or {}).get("families") or {}).get(win["family"], {}).get("adopted")
    if win["family"] == "lm":
        adopted = adopted and ("+query-energy" in win["checkpoint"] or bool(win.get("knn_evidence")))
    return bool(adopted)


def register(ctx: StageContext, selection: dict | None, run_id: str | None, champion_dir: Path | None = None) -> None:
    """The champion in the Model Registry (alias ``champion``), with its val figures as tags; the version's
    source is the champion artifact, logged to the evaluate run."""
    if not selection or not run_id:
        return
    from jouleroute.tracking import register_champion

    win = selection["winner"]
    pointer = {"family": win["family"], "checkpoint": win["checkpoint"], "model_dir": win["model_dir"] or "",
               "lam": f"{ctx.params.router.lam:g}", "baselines_hash": ctx.section_hash("baselines")}
    if champion_query_energy(selection):  # served deciding with the per-query energy saved with the champion
        pointer["query_energy"] = "1"
    if win.get("knn_evidence"):  # served as the LM router blended with a kNN fitted with these baselines
        pointer |= {"knn_weight": f"{win['knn_evidence']['weight']:g}", "knn_energy": win["knn_evidence"]["energy"]}
    tags = {"val_utility": win["val_utility"], "runner_up": selection["runner_up"], "margin": selection["margin"],
            "best_other_family": selection["best_other_family"],
            "margin_over_other_family": selection["margin_over_other_family"],
            "lambdas": ",".join(f"{x:g}" for x in selection["lambdas"]), "energy_norm": selection["energy_norm"],
            "n_val_queries": selection["n_val_queries"], "evaluate_run_id": run_id,
            "git_sha": ctx.tags("evaluate")["git_sha"]}
    tags |= {f"val_utility.{c['name']}": c["val_utility"] for c in selection["contenders"]}
    version = register_champion(ctx.tracking_uri, ctx.params.tracking.experiment, run_id, pointer, tags,
                                champion_dir)
    logger.info("champion %s registered as %s version %s (alias %s)", win["name"], selection["registered_model"],
                version, selection["alias"])


def _swept_runs(family: str, scores: Scores, lambdas: list[float]) -> list[RouterRun]:
    return [RouterRun(swept_name(family, lam), family, lam, scores.decide(lam)) for lam in lambdas]


def swept_name(family: str, lam: float) -> str:
    """A swept router's name, e.g. ``knn:0.05``: the same key in metrics.json, MLflow and the reports
    (MLflow metric names allow ':' but not '@')."""
    return f"{family}:{lam:g}"


def write_headline(ctx: StageContext, result, run: StageRun | None) -> None:
    from jouleroute.atomic import atomic_write_text

    figures = headline(result.metrics, ctx.params.router.lam)  # key order kept: `dvc exp show` shows it
    atomic_write_text(ctx.path("headline"), json.dumps(figures, indent=2) + "\n")
    if run is not None:
        run.log_metrics(flatten(figures))  # the same names in MLflow as in `dvc metrics show`
        # the params that tell runs apart (`dvc exp run -S router.lam=...`) were logged when the run opened


def _sample_split(queries: pd.DataFrame, split: str, limit: int | None, seed: int) -> pd.DataFrame:
    """Keep at most ``limit`` queries of ``split`` (seeded); other splits are untouched."""
    in_split = queries["split"] == split
    if limit is None or in_split.sum() <= limit:
        return queries
    keep = queries[in_split].sample(n=limit, random_state=seed)
    logger.info("evaluate.max_queries: scoring %d of %d %s queries (seeded sample)", limit, in_split.sum(), split)
    return pd.concat([queries[~in_split], keep]).reset_index(drop=True)


def _lm_router(ctx: StageContext, meter):
    model_dir = lm_router_dir(ctx)
    if not model_dir.exists():
        logger.warning("no GRPO router at %s: the LM router is left out of the evaluation", model_dir)
        return None
    from jouleroute.routing.lm.router import LMRouter

    return LMRouter(model_dir, meter=meter, cfg=ctx.params.router)


def overhead_cache(ctx: StageContext) -> Path:
    """Beside the embedding cache: machine-local measurements, not a DVC output (evaluation/overhead.py)."""
    return ctx.path("embedding_cache").parent / "overhead"


def _lm_overhead_key(ctx: StageContext, router, meter) -> dict:
    """What the LM router's per-query cost depends on: its architecture, inference settings and prompts,
    not λ nor the trained weights (a λ experiment retrains grpo; the same work costs the same)."""
    spec = router.spec
    settings = {"architecture": json.loads((router.model_dir / "config.json").read_text()),
                "router": ctx.params.router.model_dump(mode="json", exclude={"lam"}),
                "prompt": {"candidates": spec.candidates, "labels": spec.labels,
                           "max_query_tokens": spec.max_query_tokens, "scaffolds": spec.scaffolds}}
    return cache_key("lm", settings, meter.source, meter.device_info())


def _kept_checkpoint(ctx: StageContext) -> str:
    """Which weights ``grpo_dir/model`` holds: grpo's, or sft's when the val guard kept them."""
    path = ctx.path("grpo_dir") / "metrics.json"
    return json.loads(path.read_text()).get("kept", "grpo") if path.exists() else "grpo"


def _reference_run(runs: list[RouterRun], lam: float) -> RouterRun | None:
    """The LM router's run nearest the deployed λ: random routing copies its mix."""
    if not runs:
        return None
    return min(runs, key=lambda r: abs((r.lam or 0.0) - lam))


def lm_router_dir(ctx: StageContext) -> Path:
    return ctx.path("grpo_dir") / "model"
