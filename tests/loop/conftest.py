"""A loop workspace in a throwaway repository: the project's dvc.yaml and params.yaml with a two-candidate pool,
`init_loop` run on it, and helpers that write what a loop pipeline's stages leave behind (a query table of the
newest traffic, a labelled profile, the evaluate stage's champion folder) for the gate's tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from jouleroute.loop.init import init_loop
from jouleroute.loop.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = ("tiny-a", "tiny-b")


def main_params() -> dict:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["models"] = {"tiny": {"source": "local", "path": "unused-by-single-policies", "chat_template": True}}
    params["pool"] = [{"candidate_id": c, "model": "tiny", "prompt_style": "chat", "answer_style": "direct",
                       "max_new_tokens": 4, "batch_size": 4} for c in CANDIDATES]
    params["energy"] = {"meter": "estimate", "idle_seconds": 0.1}
    params["baselines"] = {"embedding": {"model": "hashing"}}
    return params


@pytest.fixture
def workspace(tmp_path) -> Workspace:
    root = tmp_path / "repo"
    root.mkdir()
    shutil.copy2(REPO / "dvc.yaml", root / "dvc.yaml")
    (root / "params.yaml").write_text(yaml.safe_dump(main_params(), sort_keys=False))
    ws = Workspace(root, root / "loops" / "tiny")
    init_loop(ws, capture="capture", labels="vote")
    return ws


def newest_traffic(n: int = 40, task: str = "user") -> pd.DataFrame:
    """The query table a loop's prepare writes: the newest fifth is the test split."""
    splits = ["train"] * (n * 3 // 5) + ["val"] * (n // 5)
    splits += ["test"] * (n - len(splits))
    return pd.DataFrame({"query_id": [f"{task}/{i:016x}" for i in range(n)], "task": task, "subtask": "",
                         "split": splits, "question": [f"what is {i} plus {i}?" for i in range(n)],
                         "choices_json": "[]", "gold": None, "source_file": "loops/tiny/data/prompts.jsonl",
                         "source_row": range(n)})


def labelled_profile(queries: pd.DataFrame, right: dict[str, float], energy_j: dict[str, float]) -> pd.DataFrame:
    """One row per (query, candidate): ``right[c]`` is the share of queries candidate c is labelled correct on
    (the first ones of each split), at ``energy_j[c]`` joules an answer."""
    rows = []
    for i, q in queries.reset_index(drop=True).iterrows():
        for c in CANDIDATES:
            rows.append({"query_id": q["query_id"], "candidate_id": c, "task": q["task"], "split": q["split"],
                         "correct": int((i % 10) < right[c] * 10), "energy_j": energy_j[c] * (1 + 0.01 * (i % 3)),
                         "energy_source": "estimated", "input_tokens": 12, "output_tokens": 4,
                         "label_source": "vote"})
    return pd.DataFrame(rows)


def single_champion(folder: Path, model: str, note: str = "") -> Path:
    """The evaluate stage's champion folder for a deployed single model (champion.json as evaluate writes it)."""
    from jouleroute.routing.champion import save_champion

    record = {"family": "knn", "checkpoint": None, "name": f"always {model}", "lam": 0.1, "lam_chosen_by": "accuracy",
              "lambda_range": [0.0, 2.0], "model_dir": None, "knn_evidence": None, "val_utility": 0.5,
              "evaluate_run_id": note or None, "val_sweep": None, "policy": "single", "single": model,
              "deployed": {"kind": "single", "name": f"always {model}", "model": model}, "query_energy": [],
              "embedding": {"model": "hashing"}}
    return save_champion(folder, record, {}, None)


def pipeline_outputs(ws: Workspace, params, deployed: str, right: dict[str, float], energy_j: dict[str, float]):
    """What the loop pipeline's stages leave: queries, the labelled profile, the champion deploying ``deployed``."""
    queries = newest_traffic()
    for key, frame in (("queries", queries), ("labelled_profile", labelled_profile(queries, right, energy_j))):
        path = params.paths.resolve(key, ws.root)
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.to_parquet(path)
    single_champion(params.paths.resolve("evaluate_dir", ws.root) / "champion", deployed)
