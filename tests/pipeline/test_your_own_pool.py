"""docs/your-own-pool.md followed on a small table, under real git and DVC (a tiny local router model).

`jouleroute import --init pools/mine --table data/mine.csv` writes the pool's own params.yaml and dvc.yaml; the user
points the router's base model at their model (here the tiny one) and runs `jouleroute --params pools/mine/params.yaml
repro` (`dvc repro pools/mine/dvc.yaml` from the root): import -> validate -> router_data -> sft -> grpo -> budget ->
evaluate -> study_page, then `dvc status pools/mine/dvc.yaml` is clean and `jouleroute where` shows its results.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from jouleroute.paths import SHARED_PATHS
from jouleroute.stages.table import read
from tests.pipeline.conftest import BIN, make_repo, run, tiny_params

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ITEMS = ("dvc.yaml", "jouleroute", "data/external/benchmarks", "data/manifest.yaml", "data/outcomes/tokenizers/smollm2-135m-instruct",
         "data/external/energy/mlenergy-v2")


def outcome_table(n: int = 24) -> pd.DataFrame:
    """n queries x 3 candidates, measured energy: `big` is always right and dear, `small` right on even queries."""
    rows = []
    for i in range(n):
        task = "arith" if i % 2 else "facts"
        split = "train" if i < n * 0.6 else "val" if i < n * 0.8 else "test"
        for cand, joules in (("small", 1.0), ("mid", 3.0), ("big", 9.0)):
            correct = cand == "big" or (cand == "mid" and i % 3 != 0) or (cand == "small" and i % 2 == 0)
            rows.append({"query_id": f"q{i}", "task": task, "split": split, "candidate": cand,
                         "prompt": f"question {i}: what is {i} plus {i}?" if task == "arith" else f"fact {i}?",
                         "correct": int(correct), "energy_j": joules * (1 + 0.1 * (i % 4)),
                         "energy_source": "measured-nvml", "latency_s": 0.1 * joules,
                         "input_tokens": 12, "output_tokens": 4})
    return pd.DataFrame(rows)


def test_the_recipe_from_an_outcome_table_to_its_own_pipeline(tmp_path, tiny_model):
    root = make_repo(tmp_path / "repo", tiny_params(tiny_model), ITEMS)
    run([str(BIN / "dvc"), "repro", "models"], root)  # the main pipeline converts (here: finds) the base model
    (root / "data").mkdir(exist_ok=True)
    outcome_table().to_csv(root / "data/mine.csv", index=False)

    done = run([str(BIN / "jouleroute"), "import", "--init", "pools/mine", "--table", "data/mine.csv"], root)
    assert "jouleroute --params pools/mine/params.yaml repro" in done.stdout, done.stdout
    again = run([str(BIN / "jouleroute"), "import", "--init", "pools/mine"], root, check=False)
    assert again.returncode == 1 and "already exist" in again.stderr  # never over the user's edits

    params_file = root / "pools/mine/params.yaml"
    params = yaml.safe_load(params_file.read_text())
    assert params["profile_source"] == "import_outcomes" and params["import_outcomes"]["input_file"] == "data/mine.csv"
    assert all(v.startswith(("pools/mine/", "mlruns/mine/")) for k, v in params["paths"].items()
               if k not in SHARED_PATHS), params["paths"]  # relative to the root, in the pool's folder
    # the recipe's one edit here: the router's base model (the tiny one) and small, single-thread training
    params["models"] = yaml.safe_load((root / "params.yaml").read_text())["models"]
    params["sft"] |= {"base_model": "tiny", "epochs": 1, "threads": 1, "router_layers": None}
    params["grpo"] |= {"max_steps": 2, "threads": 1, "prompts_per_step": 2}
    params["budget"] |= {"fractions": [1.0], "grpo_fractions": [], "max_steps": 1}  # the curve's reference only
    params["router"]["threads"] = 1
    params["backend"] = {"torch_threads": 1}
    params["baselines"] = {"embedding": {"model": "hashing"}, "families": ["always", "random", "oracle", "knn"]}
    params["evaluate"] |= {"bootstrap_samples": 0}
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "my pool"], root)

    done = run([str(BIN / "jouleroute"), "--params", "pools/mine/params.yaml", "repro"], root)
    stages = list(read(root / "pools/mine/dvc.yaml"))
    assert stages == ["import", "labels", "validate", "router_data", "sft", "grpo", "budget", "evaluate", "study_page"]
    assert all(f"Running stage 'pools/mine/dvc.yaml:{s}'" in done.stdout for s in stages), done.stdout
    assert "up to date" in run([str(BIN / "dvc"), "status", "pools/mine/dvc.yaml"], root).stdout
    headline = json.loads((root / "pools/mine/metrics.json").read_text())
    assert headline["source"] == "measured-nvml" and 0 <= headline["dep"]["acc"] <= 1, headline
    report = (root / "pools/mine/report.md").read_text()
    assert report.startswith("# Your pool (mine)") and "data/mine.csv" in report
    assert not (root / "artifacts/prepare").exists()  # nothing of the main pipeline's was written
    where = run([str(BIN / "jouleroute"), "--params", "pools/mine/params.yaml", "where"], root).stdout
    assert "pools/mine/artifacts/evaluate/report.md" in where and "a params copy" not in where, where


def test_an_init_folder_outside_the_repository_is_refused_and_an_absolute_one_inside_is_made_relative(tmp_path):
    from jouleroute.commands.pool_init import pipeline_folder
    from jouleroute.stages import StageFailed

    root = tmp_path / "repo"
    root.mkdir()
    assert pipeline_folder(root, str(root / "pools" / "mine")) == "pools/mine"
    assert pipeline_folder(root, "pools/mine/") == "pools/mine"
    for outside in (str(tmp_path / "elsewhere"), "../elsewhere"):  # it was written under the repo as tmp/.../elsewhere
        with pytest.raises(StageFailed, match="a pipeline lives inside the repository"):
            pipeline_folder(root, outside)
