"""The champion: the router to deploy, saved as fitted and registered.

``val_contest_champion`` runs the val contest (evaluation/val_contest.py: the LM checkpoints, the LM router with kNN
evidence or per-query energy by their cross-fitted val figures, the baselines fitted on train); the deployment
(evaluation/deployment.py) then chooses the champion on selection data, and ``adopt_deployed`` makes it the
winner; ``champion_scores`` scores
any queries with the chosen router (its val sweep, its deployed point on test); ``champion_artifact`` returns
what ``routing.champion.save_champion`` writes; ``register`` puts it in the Model Registry. Test plays no part
in any choice here.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from jouleroute.evaluation.contest import Contest, EvaluateSetup, unmetered_scores
from jouleroute.policy.choose import SINGLE
from jouleroute.policy.kinds import kind_of
from jouleroute.evaluation.val_contest import Contender, choose
from jouleroute.routing.blend import blend_scores
from jouleroute.routing.scores import Scores

logger = logging.getLogger(__name__)


def val_contest_champion(setup: EvaluateSetup, contest: Contest, tracking: bool) -> dict | None:
    """The router to deploy, chosen on val (module doc); ``None`` without val rows or contenders."""
    from jouleroute.routing.lm.spec import format_lambda

    p, extra = setup.params, []
    lm_energy = ((contest.energy_report or {}).get("families") or {}).get("lm") or {}
    shown = setup.shown(setup.lm_router_dir)
    if lm_energy.get("adopted") and not contest.blended:
        cross = lm_energy["cross_fitted"]
        by_lambda = {format_lambda(lam): u for lam, u in cross["by_lambda"].items()}
        extra.append(Contender("lm", f"{setup.kept_checkpoint}+query-energy", by_lambda, shown,
                               per_query=cross.get("per_query_utility"), points=_points(cross, format_lambda)))
    evidence = contest.evidence
    if contest.blended and evidence["cross_fitted"]["by_lambda"]:
        extra.append(Contender("lm", f"{setup.kept_checkpoint}-knn", evidence["cross_fitted"]["by_lambda"], shown,
                               knn_evidence={"weight": evidence["weight"], "energy": evidence["energy"]},
                               per_query=evidence["cross_fitted"].get("per_query_utility"),
                               points=_points(evidence["cross_fitted"], str)))
    val_contest = choose(contest.val_rows, setup.grpo_dir / "metrics.json",
                         {"sft": setup.sft_dir / "model", "grpo": setup.lm_router_dir},
                         contest.fitted if contest.on_train else {}, p.energy_policy.norm, setup.root, extra,
                         rule=p.evaluate.champion_by, tolerance=p.evaluate.accuracy_tolerance)
    if val_contest is None:
        return None
    if evidence is not None:
        val_contest["knn_evidence"] = evidence
    if contest.energy_report is not None:
        val_contest["query_energy"] = contest.energy_report
    if tracking:
        from jouleroute.tracking import CHAMPION_ALIAS, champion_name

        val_contest |= {"registered_model": champion_name(p.tracking.experiment), "alias": CHAMPION_ALIAS}
    return val_contest


def adopt_deployed(val_contest: dict, deployment: dict) -> dict:
    """``val_contest`` with the deployed champion as its winner (chosen on selection data, evaluation/deployment.py),
    which may differ from the val contest's; the val winner stays as ``val_winner``."""
    if deployment["champion"] == val_contest["winner"]["name"]:
        return val_contest
    row = next(c for c in val_contest["contenders"] if c["name"] == deployment["champion"])
    winner = {"name": row["name"], "family": row["family"], "checkpoint": row["checkpoint"],
              "val_utility": row["val_utility"], "model_dir": None, "knn_evidence": None,
              "iso_share_val": row["iso_share_val"]}
    logger.info("the champion is %s, deployed on selection data (the val contest's winner: %s)", row["name"],
                val_contest["winner"]["name"])
    return val_contest | {"winner": winner, "val_winner": val_contest["winner"]}


def _points(cross_fitted: dict, key) -> dict[str, tuple[float, float]] | None:
    """λ -> (accuracy, J/query) of a cross-fitted val figure's held-out choices; ``None`` for an older output."""
    points = cross_fitted.get("points")
    return {key(lam): (float(a), float(j)) for lam, (a, j) in points.items()} if points else None


def champion_scores(setup: EvaluateSetup, contest: Contest, val_contest: dict, asked: pd.DataFrame,
                    label: str) -> Scores | None:
    """The champion's scores on ``asked`` (decisions only: its own cost is metered on test), as it would be
    deployed; ``None`` when the champion cannot be scored here (no such router fitted or loaded)."""
    win = val_contest["winner"]
    if win["family"] in contest.fitted:
        return unmetered_scores(contest.fitted[win["family"]], asked)
    if win["family"] != "lm" or contest.lm_router is None:
        return None
    model_dir = setup.root / win["model_dir"] if win.get("model_dir") else setup.lm_router_dir
    router = contest.lm_router
    if Path(model_dir).resolve() != Path(router.model_dir).resolve():  # the sft checkpoint won
        from jouleroute.routing.lm.router import LMRouter

        meter = getattr(router, "meter", None)  # its own cost metered, as the other checkpoint's
        router = LMRouter(Path(model_dir), cfg=setup.params.router, meter=meter)
    scores = router.score(asked, progress=setup.progress(len(asked), f"LM routing ({label})"))
    weight = (win.get("knn_evidence") or {}).get("weight")
    if weight and "knn" in contest.fitted:
        scores = blend_scores(scores, unmetered_scores(contest.fitted["knn"], asked), weight,
                              win["knn_evidence"]["energy"])
    return scores


def champion_test_scores(setup: EvaluateSetup, contest: Contest, val_contest: dict) -> Scores | None:
    """The champion's test scores with its metered cost: evaluate's own when it scored this very router on test,
    else ``None`` (the deployed point then scores it afresh, its cost unmetered)."""
    from jouleroute.routing.baselines.query_energy import PerQueryEnergy

    win = val_contest["winner"]
    if win["family"] in contest.fitted:
        return contest.test_scores[win["family"]]
    if win["family"] != "lm" or contest.lm_scores is None:
        return None
    uses_energy = champion_query_energy(val_contest)
    same = (win["checkpoint"].startswith(setup.kept_checkpoint) and bool(win.get("knn_evidence")) == contest.blended
            and uses_energy == isinstance(contest.lm_router, PerQueryEnergy))
    if not same:
        return None
    return contest.lm_scores if contest.blended else contest.lm_alone


def champion_query_energy(val_contest: dict) -> bool:
    """Whether the champion decides with per-query energy: its family adopted it on val, and for the LM router
    the contender that won was scored with it (its own ``+query-energy`` one, or the kNN blend)."""
    win = val_contest["winner"]
    adopted = ((val_contest.get("query_energy") or {}).get("families") or {}).get(win["family"], {}).get("adopted")
    if win["family"] == "lm":
        adopted = adopted and ("+query-energy" in win["checkpoint"] or bool(win.get("knn_evidence")))
    return bool(adopted)


def champion_artifact(setup: EvaluateSetup, contest: Contest, val_contest: dict, deployment: dict,
                      test_scores: Scores | None, run_id: str | None) -> tuple[dict, dict, pd.DataFrame | None]:
    """What ``save_champion`` writes: the record (family, checkpoint, the deployed λ and how it was chosen, its
    selection sweep), the fitted parts the gateway assembles, and its test decisions at the deployed λ."""
    from jouleroute.routing.baselines.query_energy import PerQueryEnergy

    p, win = setup.params, val_contest["winner"]
    lam = deployment["lam"]
    record = {"family": win["family"], "checkpoint": win["checkpoint"], "name": win["name"], "lam": lam,
              "lam_chosen_by": deployment["chosen_by"],
              "lambda_range": [min(p.router_data.lambdas), max(p.router_data.lambdas)],
              "model_dir": win["model_dir"], "knn_evidence": win.get("knn_evidence"),
              "val_utility": win["val_utility"], "evaluate_run_id": run_id,
              "val_sweep": deployment.get("sweep"), "policy": deployment["policy"],
              "single": deployment["single"] if deployment["policy"] == SINGLE else None,
              "deployed": deployment.get("deployed"),  # the policy served, whatever its kind (a cascade's chain)
              "embedding": p.baselines.embedding.model_dump(mode="json") | {"cache_dir": None}}
    parts = {}  # what the gateway assembles: key -> the fitted router
    if win["family"] in contest.fitted:
        parts["router"] = contest.fitted[win["family"]]
    elif win["family"] == "lm":
        if win.get("knn_evidence"):
            parts["knn"] = contest.fitted["knn"]
        if champion_query_energy(val_contest) and isinstance(contest.lm_router, PerQueryEnergy):
            parts["lm"] = contest.lm_router  # only its per-query energy is saved: the checkpoint is model_dir
    saved, with_energy = {}, []
    for key, router in parts.items():
        if isinstance(router, PerQueryEnergy):  # saved apart: the router, and the one ê model it decides with
            saved["query_energy"], router = router.model, router.inner
            with_energy.append(key)
        if key != "lm":
            saved[key] = router
    record["query_energy"] = with_energy  # the parts that decide with per-query energy
    decisions = None  # what the gateway must reproduce on test: the route's choices, or the single model's
    picks = kind_of(deployment).picks  # None: a cascade, whose calls are its chain's
    if test_scores is not None and picks is not None:
        chosen = test_scores.decide(lam)
        decisions = pd.DataFrame({"query_id": chosen.query_ids,
                                  "candidate_id": picks(deployment, chosen.candidate_ids)})
    return record, saved, decisions


def register(val_contest: dict | None, lam: float, run_id: str | None, tracking_uri: str | None, experiment: str,
             provenance: dict, champion_dir: Path | None = None, single: str | None = None,
             cascade: str | None = None) -> str | None:
    """The champion in the Model Registry (alias ``champion``), with its val figures as tags; the version's
    source is the champion artifact, logged to the evaluate run. ``provenance``: the ``git_sha`` of the run and
    the ``baselines_hash`` of the params that fitted it; ``single``: the model served instead of routing, when
    routing does not pay on selection data. Returns the version (``None``: not registered)."""
    if not val_contest or not run_id:
        return None
    from jouleroute.tracking import register_champion

    win = val_contest["winner"]
    pointer = {"family": win["family"], "checkpoint": win["checkpoint"], "model_dir": win["model_dir"] or "",
               "lam": f"{lam:g}", "baselines_hash": provenance["baselines_hash"]}
    if single:  # routing does not pay on selection data: every query goes to this model
        pointer["single"] = single
    if cascade:  # a cascade is deployed: its chain, served with the chain's stages (champion.json's "deployed")
        pointer["cascade"] = cascade
    if champion_query_energy(val_contest):  # served deciding with the per-query energy saved with the champion
        pointer["query_energy"] = "1"
    if win.get("knn_evidence"):  # served as the LM router blended with a kNN fitted with these baselines
        pointer |= {"knn_weight": f"{win['knn_evidence']['weight']:g}", "knn_energy": win["knn_evidence"]["energy"]}
    tags = {"val_utility": win["val_utility"], "runner_up": val_contest["runner_up"], "margin": val_contest["margin"],
            "best_other_family": val_contest["best_other_family"],
            "margin_over_other_family": val_contest["margin_over_other_family"],
            "lambdas": ",".join(f"{x:g}" for x in val_contest["lambdas"]), "energy_norm": val_contest["energy_norm"],
            "n_val_queries": val_contest["n_val_queries"], "evaluate_run_id": run_id, "git_sha": provenance["git_sha"]}
    tags |= {f"val_utility.{c['name']}": c["val_utility"] for c in val_contest["contenders"]}
    version = register_champion(tracking_uri, experiment, run_id, pointer, tags, champion_dir)
    logger.info("champion %s registered as %s version %s (alias %s)", win["name"], val_contest["registered_model"],
                version, val_contest["alias"])
    return version
