"""Fixtures for router-training tests: a hand-made profile and a tiny local chat model.

The toy pool has three candidates whose correctness is written into the question text
(``easy``: everyone is right, ``medium``: mid and large, ``hard``: only large), with
energies 1, 5 and 20 J. Under the utility policy with max-normalization a hard query
goes to ``large`` at λ=0 and to ``small`` at λ=2, which is what the λ tests look for.
"""

from __future__ import annotations

import os

import pandas as pd
import pytest
import torch

from tests.conftest import tiny_router_base

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

ENERGY_J = {"small": 1.0, "mid": 5.0, "large": 20.0}
RIGHT = {"easy": {"small", "mid", "large"}, "medium": {"mid", "large"}, "hard": {"large"}}
TOPICS = ["apples", "trains", "rivers", "stars", "coins", "clocks", "birds", "maps", "lamps", "boats", "seeds", "tiles"]


def toy_tables(per_level: dict[str, int] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(profile, queries) with train/val/test splits; energies are 'estimated' like on this CPU."""
    per_level = per_level or {"train": 4, "val": 2, "test": 1}
    queries, profile = [], []
    for split, count in per_level.items():
        for level in RIGHT:
            for k in range(count):
                qid = f"toy/{split}-{level}-{k}"
                topic = TOPICS[(k + len(split)) % len(TOPICS)]
                task = "arith" if k % 2 == 0 else "logic"
                queries.append({"query_id": qid, "task": task, "subtask": "", "split": split,
                                "question": f"A {level} question about {topic} number {k}.",
                                "choices_json": "[]", "gold": "0", "source_file": "toy", "source_row": k})
                for cid, energy in ENERGY_J.items():
                    profile.append({"query_id": qid, "candidate_id": cid, "task": task, "split": split,
                                    "correct": int(cid in RIGHT[level]), "energy_j": energy,
                                    "energy_net_j": energy * 0.8, "energy_source": "estimated"})
    return pd.DataFrame(profile), pd.DataFrame(queries)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny test models gain nothing from a second thread, and on a busy 2-core box two
    spinning threads made each step ~10x slower (0.9 s vs 0.07 s measured here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    corpus = [f"A {level} question about {t} number {k}. Energy weight: 0 0.25 0.5 1 2 small mid large"
              for level in RIGHT for t in TOPICS for k in range(3)]
    return tiny_router_base(tmp_path_factory.mktemp("tiny") / "base", corpus)


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory):
    """A real MLflow sqlite store, artifacts inside the temp folder; the tracking URI is restored afterwards."""
    import mlflow

    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root}/mlflow.db"
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    mlflow.create_experiment("router-tests", artifact_location=str(root / "artifacts"))
    yield uri
    mlflow.set_tracking_uri(previous)
