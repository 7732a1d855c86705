"""docs/your-own-pool.md section 6 followed on a small prompts file, under real git and DVC (a tiny local model).

`jouleroute import --init pools/traffic --prompts data/traffic.jsonl` writes the pipeline; the user points its pool
and router at their models (here the tiny one) and runs `jouleroute --params pools/traffic/params.yaml repro`:
prepare (the prompts, time-ordered) -> models -> tournament (every candidate on every prompt, ungraded) -> labels
-> validate -> router_data -> sft -> grpo -> budget -> evaluate -> study_page. A random tiny model's answers rarely
agree, so its users' scores label it (labels.feedback, beside the vote: allow_mixed), as the gateway's
`POST /v1/feedback` would have collected them.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from jouleroute.stages.table import read
from tests.pipeline.conftest import BIN, make_repo, run, tiny_params

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ITEMS = ("dvc.yaml", "jouleroute", "data/external/benchmarks", "data/manifest.yaml", "studies/replay/dvc.yaml",
         "studies/replay/params.yaml")
N = 20


def _request(i: int) -> dict:
    return {"model": "jouleroute-auto", "created": 1_700_000_000 + 60 * i,
            "messages": [{"role": "user", "content": f"What is {i} plus {i}? End with 'The answer is N'."}]}


def test_the_recipe_from_prompts_without_gold_to_a_deployed_policy(tmp_path, tiny_model):
    root = make_repo(tmp_path / "repo", tiny_params(tiny_model), ITEMS)
    (root / "data/traffic.jsonl").write_text("".join(json.dumps(_request(i)) + "\n" for i in range(N)))
    done = run([str(BIN / "jouleroute"), "import", "--init", "pools/traffic", "--prompts", "data/traffic.jsonl"],
               root)
    assert "jouleroute --params pools/traffic/params.yaml repro" in done.stdout, done.stdout

    params_file = root / "pools/traffic/params.yaml"
    params = yaml.safe_load(params_file.read_text())
    assert params["prepare"] == {"source": "prompts", "prompts": {"file": "data/traffic.jsonl"}}
    assert params["labels"]["source"] == "vote" and params["grpo"]["reward_source"] == "profile"
    # the users' scores: the few-shot candidate always did well, the others on every other prompt
    from jouleroute.labels.queries import prompt_query_id

    feedback = [{"query_id": prompt_query_id("user", _request(i)["messages"][0]["content"]), "candidate_id": c,
                 "score": float(c == "tiny-fewshot" or i % 2 == 0)}
                for i in range(N) for c in ("tiny-direct", "tiny-loglik", "tiny-fewshot")]
    pd.DataFrame(feedback).to_csv(root / "data/feedback.csv", index=False)
    params["labels"] |= {"feedback": "data/feedback.csv", "allow_mixed": True}
    params["sft"] |= {"router_layers": None}
    params["validate"] = {"min_j_per_output_token": 0}  # a tiny random model is cheaper per token than any GPU's
    params["budget"] |= {"fractions": [1.0], "grpo_fractions": [], "max_steps": 1}
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    run(["git", "add", "-A"], root)
    run(["git", "commit", "-qm", "my traffic"], root)

    done = run([str(BIN / "jouleroute"), "--params", "pools/traffic/params.yaml", "repro"], root)
    stages = list(read(root / "pools/traffic/dvc.yaml"))
    assert stages[:4] == ["prepare", "models", "tournament", "labels"] and stages[-1] == "study_page"
    assert all(f"Running stage 'pools/traffic/dvc.yaml:{s}'" in done.stdout for s in stages), done.stdout
    assert "up to date" in run([str(BIN / "dvc"), "status", "pools/traffic/dvc.yaml"], root).stdout

    queries = pd.read_parquet(root / "pools/traffic/artifacts/prepare/queries.parquet")
    assert queries["gold"].isna().all() and len(queries) == N
    order = queries.sort_values("source_row")["split"].tolist()  # the oldest train, the newest test
    assert order[0] == "train" and order[-1] == "test"
    graded = pd.read_parquet(root / "pools/traffic/artifacts/tournament/profile.parquet")
    assert graded["correct"].isna().all() and len(graded) == 3 * N  # every candidate, nothing graded
    labelled = pd.read_parquet(root / "pools/traffic/artifacts/labels/profile.parquet")
    assert labelled["correct"].notna().all() and "feedback" in set(labelled["label_source"])
    headline = json.loads((root / "pools/traffic/metrics.json").read_text())
    assert "feedback" in headline["labels"] and headline["dep"]["kind"] in ("single", "route", "cascade"), headline
    report = (root / "pools/traffic/report.md").read_text()
    assert "## Labels without gold" in report and "scored on the **labels**" in report
    assert not (root / "artifacts/prepare").exists()  # nothing of the main pipeline's was written
