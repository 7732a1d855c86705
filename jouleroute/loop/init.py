"""A new loop workspace (workspace.py): its config, its pipeline and its first served version.

The pipeline is the main one's, read from the repository's dvc.yaml and params.yaml when the loop is made (so a
stage added there is in the next loop made), the way `jouleroute import --init` writes a pool's:

- ``dvc.yaml``: the main stages from ``prepare`` to ``evaluate`` but ``models`` (its converted models are the main
  pipeline's, shared) and ``budget`` (a study of training budgets, not part of deploying), each running
  ``jouleroute --params <folder>/params.yaml <stage>`` at the root (``wdir``), with its params read from the
  loop's file; ``prepare`` depends on the folded prompts and ``labels`` on the folded feedback, so DVC reruns
  exactly what new traffic changes;
- ``params.yaml``: the main params with ``prepare.source: prompts`` (the folded prompts, time-ordered: the newest
  are the test split), ``labels`` without gold (``reference`` or ``vote``, the feedback table overriding them),
  ``grpo.reward_source: profile`` (live rollouts grade on gold; the tournament then profiles every train
  query), every output under ``<folder>/artifacts`` and
  an MLflow store and experiment of its own;
- ``serve.yaml``: the same params serving the loop's served version (``serving/champion``) with capture on into
  ``loop.yaml``'s folder and the file watch on, so `jouleroute --params <folder>/serve.yaml serve` serves what the
  loop promotes without a restart;
- the first served version: the main pipeline's deployed champion when there is one (``adopt``), else nothing
  (the first iteration's candidate is promoted without a comparison).
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path

import yaml

from jouleroute.loop.workspace import LoopError, Workspace
from jouleroute.paths import SHARED_PATHS, PathsConfig

LEFT_OUT = ("models", "budget")  # shared with the main pipeline / not part of deploying
FIRST, LAST = "prepare", "evaluate"
logger = logging.getLogger(__name__)


def loop_stages(main_dvc: dict, rel: str) -> dict:
    """The loop's dvc.yaml ``stages``: the main ones from prepare to evaluate (module doc)."""
    names = list(main_dvc["stages"])
    if FIRST not in names or LAST not in names:
        raise LoopError(f"dvc.yaml: the loop runs the stages {FIRST} to {LAST}, which it does not hold")
    wdir = os.path.relpath(".", rel)
    stages = {}
    for name in names[names.index(FIRST):names.index(LAST) + 1]:
        if name in LEFT_OUT:
            continue
        body = copy.deepcopy(main_dvc["stages"][name])
        body = {"wdir": wdir, "cmd": f"jouleroute --params {rel}/params.yaml {name}",
                **{k: v for k, v in body.items() if k not in ("cmd", "wdir")}}
        body["params"] = [{f"{rel}/params.yaml": [p for p in body.get("params", []) if isinstance(p, str)]}]
        extra = {"prepare": f"{rel}/data/prompts.jsonl", "labels": f"{rel}/data/feedback.csv"}.get(name)
        if extra:
            body["deps"] = [*body.get("deps", []), extra]
        stages[name] = body
    return stages


def loop_paths(main_paths: dict, rel: str, name: str) -> dict:
    """Every output path of the main params moved under the workspace (the MLflow store under mlruns/loop-<name>/);
    the shared inputs and caches (jouleroute/paths.py ``SHARED_PATHS``) kept."""
    paths = {}
    for key, field in PathsConfig.model_fields.items():
        value = main_paths.get(key, field.default)
        if value is None:  # an optional path the main params leave unset
            continue
        if key in SHARED_PATHS:
            paths[key] = value
        elif value.startswith("mlruns/"):
            paths[key] = f"mlruns/loop-{name}/{value.removeprefix('mlruns/')}"
        else:
            paths[key] = f"{rel}/{value}"
    return paths


def loop_params(main: dict, rel: str, name: str, labels: str, task: str) -> dict:
    params = {k: copy.deepcopy(v) for k, v in main.items() if k not in ("gateway",)}
    params["paths"] = loop_paths(main.get("paths") or {}, rel, name)
    params["profile_source"] = "tournament"
    split = (main.get("prepare") or {}).get("split") or {"train": 0.6, "val": 0.2, "test": 0.2}
    params["prepare"] = {"seed": (main.get("prepare") or {}).get("seed", 0), "source": "prompts",
                         "prompts": {"file": f"{rel}/data/prompts.jsonl", "task": task, "split": split}}
    source, _, reference = labels.partition(":")
    if source not in ("reference", "vote") or (source == "reference") != bool(reference):
        raise LoopError(f"--labels {labels!r}: give vote, or reference:<candidate> (the loop's traffic has no gold)")
    pool = [c.get("candidate_id") for c in main.get("pool") or [] if isinstance(c, dict)]
    if reference and pool and reference not in pool:  # refused now, not after the loop's first tournament
        raise LoopError(f"--labels {labels!r}: {reference!r} is not a candidate of the pool ({', '.join(pool)})")
    params["labels"] = {**(main.get("labels") or {}), "source": source, "reference": reference or None,
                        "feedback": f"{rel}/data/feedback.csv", "allow_mixed": True}
    params["grpo"] = {**(main.get("grpo") or {}), "reward_source": "profile"}
    # GRPO then learns from the profile's own labelled pairs, so the tournament answers every train query
    params["tournament"] = {**(main.get("tournament") or {}), "train_fraction": 1.0}
    params["tracking"] = {**(main.get("tracking") or {}), "experiment": f"jouleroute-loop-{name}"}
    return params


def serve_params(loop: dict, main: dict, rel: str, capture: str, poll_s: float) -> dict:
    params = copy.deepcopy(loop)
    params["paths"] |= {"evaluate_dir": f"{rel}/serving", "queries": f"{rel}/serving/champion/queries.parquet",
                        "profile": f"{rel}/serving/champion/profile.parquet"}
    params["gateway"] = {**(main.get("gateway") or {}), "capture": {"folder": capture}, "reload_poll_s": poll_s}
    params["tracking"] = {**params["tracking"], "enabled": False}  # the served champion is the loop's, not the registry's
    return params


HEADER = ("# The loop {name}'s {what}, written by `jouleroute-flow loop --init` from the main pipeline's (docs/loop.md).\n"
          "# Every path is relative to the repository root, where the stages run.\n\n")


def init_loop(ws: Workspace, capture: str, labels: str = "vote", task: str = "user", poll_s: float = 2.0) -> list[Path]:
    """Write the workspace (module doc); never over an existing one. The files written."""
    if ws.config_file.exists() or ws.dvc_file.exists():
        raise LoopError(f"{ws.rel}: a loop is already here ({ws.show(ws.config_file)}); nothing was written")
    main_params = yaml.safe_load((ws.root / "params.yaml").read_text()) or {}
    main_dvc = yaml.safe_load((ws.root / "dvc.yaml").read_text()) or {}
    loop = loop_params(main_params, ws.rel, ws.name, labels, task)
    files = {
        ws.config_file: HEADER.format(name=ws.name, what="settings") + yaml.safe_dump(
            {"capture": capture, "margin": None, "samples": 1000, "confidence": 0.95, "seed": 0, "keep_versions": 5},
            sort_keys=False),
        ws.params_file: HEADER.format(name=ws.name, what="params") + yaml.safe_dump(loop, sort_keys=False),
        ws.dvc_file: HEADER.format(name=ws.name, what="pipeline") + yaml.safe_dump(
            {"stages": loop_stages(main_dvc, ws.rel)}, sort_keys=False),
        ws.serve_params: HEADER.format(name=ws.name, what="gateway params") + yaml.safe_dump(
            serve_params(loop, main_params, ws.rel, capture, poll_s), sort_keys=False),
        ws.folder / ".gitignore": "/serving/\n/state.json\n/plots/\n",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    ws.prompts.parent.mkdir(parents=True, exist_ok=True)
    ws.serving.mkdir(parents=True, exist_ok=True)
    return list(files)


def adopt(ws: Workspace, champion: Path, queries: Path, profile: Path) -> Path | None:
    """Serve ``champion`` (the main pipeline's deployed policy) as the loop's first version; ``None`` when the
    folder holds no deployed champion (the first iteration then promotes its candidate without comparison)."""
    from jouleroute.loop import serving
    from jouleroute.provenance import git_sha
    from jouleroute.routing.champion import read_champion

    record = read_champion(champion)
    if record is None or not record.get("deployed"):
        return None
    for what, path in (("training queries", queries), ("labelled profile", profile)):
        if not path.is_file():
            logger.warning("adopting %s without its %s (%s is missing): the loop measures no drift against this "
                           "first version; run the main pipeline's stages first to keep them", ws.show(champion),
                           what, ws.show(path))
    folder = serving.write_version(ws.serving, ws.root, champion, queries, profile,
                                   {"data": {"adopted_from": ws.show(champion), "git_sha": git_sha(ws.root)}})
    serving.swap(ws.serving, folder)
    serving.append_history(ws.serving, {"champion": str(folder), "previous": None, "why": "adopted",
                                        "policy_version": serving.policy_version(folder)})
    return folder
