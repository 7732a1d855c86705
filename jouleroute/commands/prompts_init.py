"""`jouleroute import --init DIR --prompts FILE`: a pipeline of its own for a user's prompts, without gold answers.

Writes ``DIR/params.yaml`` and ``DIR/dvc.yaml`` from the main pipeline's own files: the same stages, deps and
params, with ``prepare.source: prompts`` (the query table from FILE: a chat-completions JSONL, or a parquet with a
prompt column), the tournament on every train query (labels need every candidate's answer), ``labels.source:
vote`` (or ``reference`` with ``--reference CANDIDATE``), GRPO replaying the labelled pairs, and `study_page`
writing ``DIR/report.md`` in place of the embedded default's page. Every output lies under ``DIR/artifacts/``, its
MLflow store in ``mlruns/<name>/``; the stages run at the repository root (``wdir``). Then
`jouleroute --params DIR/params.yaml repro` runs prepare -> models -> tournament -> labels -> validate -> ... ->
evaluate -> study_page, and `jouleroute --params DIR/params.yaml serve` serves what it deployed
(docs/your-own-pool.md). The pool is the main pipeline's: edit ``pool:`` and ``models:`` before the first run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from jouleroute.paths import PathsConfig
from jouleroute.stages import StageFailed
from jouleroute.stages.table import REPO

SHARED = ("data_root", "data_manifest", "data_dir", "embedding_cache", "trunk_cache")  # the repository's own
PAGE_STAGE, PAGE_STUDY = "study_page", "studies/replay"  # a study's page stage, in place of embedded_page


def as_study(stages: dict, params_file: str, wdir: str, drop: tuple[str, ...] = ()) -> dict:
    """The main pipeline's ``stages`` (dvc.yaml, loaded) as a study's: run at ``wdir`` with ``--params
    params_file``, its params keys read from that file, ``meta`` left out, the stages in ``drop`` too."""
    out = {}
    for name, body in stages.items():
        if name in drop:
            continue
        body = {k: v for k, v in body.items() if k not in ("meta", "wdir", "cmd")}
        keys = [k for item in body.get("params") or [] for k in (next(iter(item.values())) if isinstance(item, dict)
                                                                    else [item])]
        out[name] = {"wdir": wdir, "cmd": f"jouleroute --params {params_file} {name}", **body,
                     "params": [{params_file: keys}]}
    return out


def page_stage(root: Path = REPO) -> dict:
    """The study page stage (studies/replay/dvc.yaml's), which writes ``paths.study_doc``."""
    return yaml.safe_load((root / PAGE_STUDY / "dvc.yaml").read_text())["stages"][PAGE_STAGE]


def _check_reference(reference: str, params: dict) -> None:
    """--reference names a candidate of the pool the pipeline starts from (params.yaml's): refused before anything is
    written, not by `check-params` after (config.Params, labels.reference)."""
    pool = [c.get("candidate_id") for c in params.get("pool") or [] if isinstance(c, dict)]
    if pool and reference not in pool:
        raise StageFailed(f"--reference {reference}: not a candidate of the pool the new pipeline starts from "
                          f"(params.yaml's pool: {', '.join(map(str, pool))}); name one of them, or --init without "
                          "--reference, then set pool: and labels (source: reference) in its params.yaml; nothing "
                          "was written")


def render(folder: str, prompts: str, reference: str | None = None, root: Path = REPO) -> dict[str, str]:
    """``{relative path: text}`` of the pipeline's params.yaml and dvc.yaml."""
    name = re.sub(r"[^a-z0-9._-]+", "-", Path(folder).name.lower()).strip("-.")
    if not name:
        raise StageFailed(f"--init {folder}: give a folder with a name, e.g. pools/mine")
    params = yaml.safe_load((root / "params.yaml").read_text())
    if reference:
        _check_reference(reference, params)
    main = PathsConfig(**params["paths"]).model_dump()
    own = {"mlflow_db": f"mlruns/{name}/mlflow.db", "study_doc": f"{folder}/report.md",
           "headline": f"{folder}/metrics.json"}
    params["paths"] = {k: v if k in SHARED else f"{folder}/{v}" for k, v in main.items() if v is not None} | own
    params["prepare"] = {"source": "prompts", "prompts": {"file": prompts}}
    params["labels"] = {**params.get("labels", {}), "source": "reference" if reference else "vote",
                        "reference": reference}
    params["tournament"]["train_fraction"] = 1.0  # a vote or a reference needs every candidate's answer
    params["grpo"]["reward_source"] = "profile"  # live rollouts grade on gold: GRPO replays the labelled pairs
    params["tracking"] = {**params.get("tracking", {}), "experiment": f"jouleroute-{name}"}
    wdir = os.path.relpath(".", folder)
    params_file = f"{folder}/params.yaml"
    stages = as_study(yaml.safe_load((root / "dvc.yaml").read_text())["stages"], params_file, wdir,
                      drop=("embedded_page",))
    stages["prepare"]["deps"] = [prompts, *stages["prepare"]["deps"]]  # a new prompt reruns everything after it
    stages[PAGE_STAGE] = as_study({PAGE_STAGE: page_stage(root)}, params_file, wdir)[PAGE_STAGE]
    header = (f"# Your own prompts' pipeline ({name}), written by `jouleroute import --init {folder} --prompts "
              f"{prompts}`\n# from the main pipeline's files (docs/your-own-pool.md). Run it with:\n"
              f"#   jouleroute --params {params_file} repro\n"
              "# Every path is relative to the repository root, where the stages run.\n\n")
    dump = lambda d: yaml.safe_dump(d, sort_keys=False, width=115, allow_unicode=True)  # noqa: E731
    return {params_file: header + dump(params), f"{folder}/dvc.yaml": header + dump({"stages": stages})}
