"""A tiny but complete jouleroute repository: real git, DVC, MLflow (sqlite), GE and Prefect,
with a random-weight Llama built locally instead of the packaged models (fast, no download)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def tiny_params(model_dir: Path) -> dict:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"]["samples"] = {t: 3 for t in
                                    ("gsm8k", "math500", "mmlu", "arc_challenge", "arc_easy", "hellaswag", "bbh")}
    params["models"] = {"tiny": {"source": "local", "path": str(model_dir), "chat_template": True}}
    params["pool"] = [
        {"candidate_id": "tiny-direct", "model": "tiny", "prompt_style": "chat", "answer_style": "direct",
         "max_new_tokens": 3, "batch_size": 8},
        {"candidate_id": "tiny-loglik", "model": "tiny", "prompt_style": "chat", "answer_style": "loglik",
         "freeform_style": "cot", "max_new_tokens": 12, "batch_size": 8},
        {"candidate_id": "tiny-fewshot", "model": "tiny", "prompt_style": "fewshot", "answer_style": "direct",
         "max_new_tokens": 4, "batch_size": 8},
    ]
    params["energy"] = {"meter": "estimate", "idle_seconds": 0.2}
    # One thread everywhere: tiny models gain nothing from two, and tests may share the CPU.
    params["backend"]["torch_threads"] = 1
    params["router"]["threads"] = 1
    params["tournament"] = {**params["tournament"], "train_fraction": 1.0}  # every query: GRPO reads the profile
    params["sft"] = {"base_model": "tiny", "epochs": 1.0, "threads": 1, "seed": 0}
    # GRPO reads the full profile here (every candidate of every query run); `tiny_repo` runs it live
    params["grpo"] = {**params["grpo"], "max_steps": 2, "threads": 1, "reward_source": "profile", "num_generations": None}
    params["baselines"] = {"embedding": {"model": "hashing"}}
    params["evaluate"] = {**params["evaluate"], "bootstrap_samples": 0}
    return params


def run(cmd: list[str], cwd: Path, check: bool = True, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "DVC_NO_ANALYTICS": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           **(env or {})}
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, **kw)
    if check and done.returncode != 0:
        raise AssertionError(f"{cmd} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return done


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from jouleroute.backends.tiny import build_tiny_llama

    return build_tiny_llama(tmp_path_factory.mktemp("tiny-model"))


def make_repo(root: Path, params: dict, items=("dvc.yaml", "jouleroute", "data/external/benchmarks", "data/manifest.yaml")) -> Path:
    """A git + DVC repository at ``root`` with the project's dvc.yaml, code and data, and ``params``."""
    root.mkdir(parents=True, exist_ok=True)
    for item in items:
        src = REPO / item
        (root / item).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, root / item, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, root / item)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (root / ".gitignore").write_text("/artifacts/\n/mlruns/\n__pycache__/\n")
    run(["git", "init", "-q"], root)
    run([str(BIN / "dvc"), "init", "-q"], root)
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "tiny"], root)
    return root


@pytest.fixture(scope="session")
def tiny_repo(tmp_path_factory, tiny_model) -> Path:
    """A git + DVC repository with the project's dvc.yaml, code and data, and tiny params."""
    # README.md and data/model_cards.yaml: the `embedded_page` stage writes the README's generated block.
    params = tiny_params(tiny_model)
    # params.yaml's live GRPO: the tournament profiles half of each task's train queries, GRPO's rollouts run
    # the others. A 4th query on two tasks gives each a 2nd train query, left unprofiled (with 3 queries a task
    # has 1 train query, always profiled); on these two tasks their val and test queries stay those of 3
    params["prepare"]["samples"].update(gsm8k=4, arc_easy=4)
    params["tournament"] = {**params.get("tournament", {}), "train_fraction": 0.5}  # SFT fits this share too
    params["grpo"].update(reward_source="live", num_generations=2, prompts_per_step=2)
    return make_repo(tmp_path_factory.mktemp("repo"), params,
                     ("dvc.yaml", "jouleroute", "data/external/benchmarks", "data/manifest.yaml", "data/model_cards.yaml", "README.md"))
