"""One iteration of the loop: fold -> the pipeline -> the gate -> promote or refuse -> the record.

1. **fold** (fold.py): the capture's new lines into the workspace's prompts file and feedback table;
2. **data version**: both files hashed (``dvc add`` where the repository is a DVC repository, so each
   iteration's traffic is a version in DVC's cache), with the git sha;
3. **the pipeline**: the loop's own dvc.yaml, prepare (from the prompts) to evaluate, through DVC: the same stage
   commands ``jouleroute repro`` and the Prefect flow run (``run_pipeline``: ``repro`` here, one Prefect task
   per stage in flows/loop.py); the tournament runs only the new (query, candidate) pairs (its shard store);
4. **gate** (gate.py, score.py): the candidate (the evaluate stage's champion) against the policy served now, on
   the newest held-out traffic (the new query table's test split), by paired intervals;
5. **promote** (serving.py: a new version folder, then an atomic swap of the served link) or **refuse** (the
   served link untouched);
6. **record** (report.py): an MLflow run with the decision and its figures, a line of the loop's report.

Each step is a function of the workspace and the typed params (``LoopParams``: what the loop reads of them; the
params file sits above this package), so the flow can run them as tasks and a test can run them one by one.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Protocol

import pandas as pd
import yaml

from jouleroute.loop import report, serving
from jouleroute.loop.fold import Folded, fold
from jouleroute.loop.gate import PROMOTE, REFUSE, promotion_decision
from jouleroute.loop.score import CannotScore, drift, paired, policy_picks
from jouleroute.loop.workspace import LoopConfig, LoopError, Workspace, jsonl_records
from jouleroute.provenance import file_sha256, git_sha

logger = logging.getLogger(__name__)


class LoopParams(Protocol):
    """What the loop reads of the loop pipeline's params (``jouleroute.config.Params`` has it all), besides what
    the gateway's ``champion_router`` reads to load a policy (gateway/router_build.py ``Params``)."""

    paths: object  # queries, profile, labelled_profile, evaluate_dir, mlflow_db
    prepare: object  # prepare.prompts: how a prompt's task, and so its query id, is read
    evaluate: object  # evaluate.noninferiority_margin: the gate's default margin
    energy_policy: object  # energy_policy.column: the joules compared
    baselines: object  # baselines.embedding: the drift figure embeds queries as the routers do
    gateway: object  # gateway.drift.quantile: the drift figure's threshold, as the gateway's gauge
    tracking: object


def fold_step(ws: Workspace, params: LoopParams) -> Folded:
    if params.prepare.source != "prompts" or params.prepare.prompts is None:
        raise LoopError(f"{ws.show(ws.params_file)}: the loop's pipeline reads its prompts (prepare.source: prompts, "
                        f"prepare.prompts.file: {ws.show(ws.prompts)})")
    return fold(ws.capture_folder(), ws.prompts, ws.feedback, ws.state, params.prepare.prompts)


def data_version(ws: Workspace) -> dict:
    """The traffic this iteration learns from, by content: each file's md5 (DVC's, where the repository is a DVC
    repository: ``dvc add`` puts that version in its cache) and the git sha of the code."""
    files = {"prompts": ws.prompts, "feedback": ws.feedback}
    found: dict = {"git_sha": git_sha(ws.root), "dvc": (ws.root / ".dvc").is_dir()}
    if found["dvc"]:
        _dvc(ws.root, "add", "-q", *[ws.show(p) for p in files.values()])
        for key, path in files.items():
            meta = yaml.safe_load(path.with_name(path.name + ".dvc").read_text())
            found[key] = {"path": ws.show(path), "md5": meta["outs"][0]["md5"]}
    else:
        for key, path in files.items():
            found[key] = {"path": ws.show(path), "sha256": file_sha256(path)}
    return found


def profile_version(ws: Workspace, params: LoopParams) -> dict:
    """The profiles the candidate learned from, as DVC recorded them in the loop's dvc.lock (sha256 without one)."""
    lock = ws.folder / "dvc.lock"
    outs = {}
    if lock.is_file():
        for stage in (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).values():
            outs.update({o["path"]: o.get("md5") for o in stage.get("outs", [])})
    found = {}
    for key in ("profile", "labelled_profile", "queries"):
        path = params.paths.resolve(key, ws.root)
        md5 = outs.get(ws.show(path))
        found[key] = {"path": ws.show(path), "md5": md5} if md5 else {"path": ws.show(path),
                                                                      "sha256": file_sha256(path)}
    return found


def decided_on(ws: Workspace, data: dict) -> int | None:
    """The iteration that already decided on exactly this traffic (the same prompts and feedback), if any: a
    scheduled run with nothing new records no second decision on it. An iteration that failed before its decision
    left no report line, so its traffic is taken up by the next run."""
    keys = ("prompts", "feedback")
    for entry in reversed(_entries(ws)):
        if all((entry.get("data") or {}).get(k) == data.get(k) for k in keys):
            return entry["iteration"]
    return None


def repro(ws: Workspace) -> None:
    """The loop's pipeline through DVC, as `jouleroute --params <folder>/params.yaml repro` runs it."""
    _dvc(ws.root, "repro", ws.show(ws.dvc_file))


def gate_step(ws: Workspace, params: LoopParams, cfg: LoopConfig) -> dict:
    """The candidate against the policy served now on the newest test queries: the decision with its figures."""
    from jouleroute.routing.champion import read_champion

    candidate = params.paths.resolve("evaluate_dir", ws.root) / "champion"
    served = serving.serving_folder(ws.serving)
    margin = cfg.margin if cfg.margin is not None else params.evaluate.noninferiority_margin
    base = {"candidate_folder": ws.show(candidate), "serving_folder": served and ws.show(served),
            "serving_version": served and serving.policy_version(served), "margin": margin}
    if read_champion(candidate) is None:
        return {**base, "decision": REFUSE, "reason": "the iteration deployed no policy (evaluate chose no champion: "
                f"{ws.show(candidate)}/champion.json says why)"}
    base["candidate_version"] = serving.policy_version(candidate)
    if served is None:
        return {**base, "decision": PROMOTE, "reason": "nothing served yet: the first version"}
    if base["candidate_version"] == base["serving_version"]:  # no new version folder, no reload, for no change
        return {**base, "decision": REFUSE, "reason": "the candidate is the policy served now (the same version): "
                "nothing to promote"}
    queries = pd.read_parquet(params.paths.resolve("queries", ws.root))
    test = queries[queries["split"] == "test"].reset_index(drop=True)
    if test.empty:
        raise LoopError(f"{ws.show(params.paths.resolve('queries', ws.root))}: no test queries (the newest traffic); "
                        "fold more traffic or raise prepare.prompts.split.test")
    profile = pd.read_parquet(params.paths.resolve("labelled_profile", ws.root))
    try:
        pairs = paired(policy_picks(params, ws.root, candidate, test, base["candidate_version"]),
                       policy_picks(params, ws.root, served, test, base["serving_version"]),
                       list(test["query_id"]), profile, params.energy_policy.column)
    except CannotScore as error:
        return {**base, "decision": REFUSE, "reason": f"cannot compare on the newest traffic: {error}"}
    served_queries = served / "queries.parquet"
    shift = drift(params.baselines.embedding, params.gateway.drift.quantile, pd.read_parquet(served_queries), test) \
        if served_queries.is_file() else {"skipped": f"{ws.show(served)} holds no queries.parquet (adopted before "
                                          "the main pipeline's prepare had run): nothing to measure drift against"}
    verdict = promotion_decision(pairs["candidate_correct"], pairs["candidate_energy"], pairs["serving_correct"],
                                 pairs["serving_energy"], margin, cfg.samples, cfg.confidence, cfg.seed)
    from jouleroute.tracking import energy_label

    sources = profile.loc[profile["query_id"].isin(set(test["query_id"])), "energy_source"].dropna().astype(str)
    return {**base, **verdict, "n_test": pairs["n_test"], "n_unlabelled": pairs["n_unlabelled"], "drift": shift,
            "energy_source": energy_label(list(sources)),  # of the joules the figures compare (MLflow's tag)
            "candidate_picks": {k: int(v) for k, v in pairs["candidate_picks"].items()},
            "serving_picks": {k: int(v) for k, v in pairs["serving_picks"].items()}}


def promote_step(ws: Workspace, params: LoopParams, gate: dict, data: dict) -> dict:
    """Promote (a new version, then the swap) or leave the served link as it is; what is served afterwards."""
    before = serving.serving_folder(ws.serving)
    if gate["decision"] != PROMOTE:
        return {"promoted": False, "served": before and serving.policy_version(before),
                "served_folder": before and ws.show(before)}
    champion = serving.write_version(ws.serving, ws.root, params.paths.resolve("evaluate_dir", ws.root) / "champion",
                                     params.paths.resolve("queries", ws.root),
                                     params.paths.resolve("labelled_profile", ws.root),
                                     {"data": data, "gate": {k: v for k, v in gate.items() if not k.endswith("picks")}})
    previous = serving.swap(ws.serving, champion)
    serving.append_history(ws.serving, {"champion": str(champion), "previous": previous and str(previous),
                                        "policy_version": serving.policy_version(champion)})
    serving.prune(ws.serving, ws.config().keep_versions)
    logger.info("promoted: serving %s (%s), was %s", serving.policy_version(champion), ws.show(champion),
                previous and ws.show(previous))
    return {"promoted": True, "served": serving.policy_version(champion), "served_folder": ws.show(champion),
            "previous_folder": previous and ws.show(previous)}


def record_step(ws: Workspace, params: LoopParams, cfg: LoopConfig, folded: Folded, data: dict, gate: dict,
                promoted: dict) -> dict:
    """The iteration's MLflow run and report line (report.py); returns the report entry."""
    entry = {"iteration": len(_entries(ws)) + 1, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "decision": gate["decision"], "reason": gate["reason"], "served": promoted["served"],
             "candidate_version": gate.get("candidate_version"), "folded": folded.as_dict(), "data": data,
             "gate": {k: v for k, v in gate.items() if k not in ("decision", "reason")},
             "config": cfg.model_dump(mode="json"), "promotion": promoted}
    figure = report.gate_figure(entry, ws.folder / "plots" / f"gate-{entry['iteration']:04d}.png")
    uri = None
    if params.tracking.enabled:
        from jouleroute.tracking import tracking_uri

        uri = tracking_uri(params.paths.resolve("mlflow_db", ws.root))
    entry["mlflow_run_id"] = report.log_run(uri, params.tracking.experiment, entry, figure,
                                            {"git_sha": data.get("git_sha", ""), "loop": ws.rel})
    report.append(ws.report_jsonl, ws.report_md, entry)
    return entry


def run_iteration(ws: Workspace, params: LoopParams, run_pipeline: Callable[[Workspace], None] = repro
                  ) -> dict | None:
    """The steps above, in order (module doc); the report entry, or ``None`` when the traffic is the one the last
    decision was taken on (``decided_on``)."""
    cfg = ws.config()
    folded = fold_step(ws, params)
    data = data_version(ws)
    if decided_on(ws, data) is not None:
        return None
    run_pipeline(ws)
    data |= profile_version(ws, params)
    gate = gate_step(ws, params, cfg)
    promoted = promote_step(ws, params, gate, data)
    return record_step(ws, params, cfg, folded, data, gate, promoted)


def _entries(ws: Workspace) -> list[dict]:
    return jsonl_records(ws.report_jsonl)


def _dvc(root: Path, *args: str) -> None:
    beside = Path(sys.executable).parent / "dvc"  # the venv's dvc and jouleroute, whatever PATH says
    env = os.environ | {"PATH": os.pathsep.join([str(beside.parent), os.environ.get("PATH", "")])}
    done = subprocess.run([str(beside) if beside.exists() else "dvc", *args], cwd=root, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise LoopError(f"`dvc {' '.join(args)}` failed ({done.returncode}):\n" + "\n".join(tail))
