"""The loop's gate and promotion (jouleroute/loop/iteration.py) on what a loop pipeline leaves behind: a better
candidate is promoted and the gateway serving the loop's folder reloads to its version; a worse one is refused and
the served version is unchanged; every decision is an MLflow run (real sqlite store) and a report line."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from jouleroute.config import load_params
from jouleroute.loop import serving
from jouleroute.loop.iteration import data_version, fold_step, gate_step, promote_step, record_step
from jouleroute.loop.workspace import Workspace
from tests.loop.conftest import CANDIDATES, main_params, pipeline_outputs

ACCURATE = {"tiny-a": 0.9, "tiny-b": 0.3}  # tiny-a is right on 9 queries in 10, tiny-b on 3
ENERGY = {"tiny-a": 1.0, "tiny-b": 3.0}


def _iteration(ws: Workspace, deployed: str) -> dict:
    params = load_params(ws.params_file)
    pipeline_outputs(ws, params, deployed, ACCURATE, ENERGY)
    cfg = ws.config()
    folded = fold_step(ws, params)
    data = data_version(ws)
    gate = gate_step(ws, params, cfg)
    promoted = promote_step(ws, params, gate, data)
    return record_step(ws, params, cfg, folded, data, gate, promoted)


def _serve_params(ws: Workspace):
    raw = yaml.safe_load(ws.serve_params.read_text())
    raw["gateway"]["upstreams"] = {c: {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "served_name": c}
                                   for c in CANDIDATES}  # never called: the test reads the served version
    raw["gateway"]["auth"] = {"keys_env": None}
    ws.serve_params.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_params(ws.serve_params)


def test_init_writes_a_loop_pipeline_of_the_main_stages(workspace):
    ws = workspace
    stages = yaml.safe_load(ws.dvc_file.read_text())["stages"]
    main = list(yaml.safe_load((ws.root / "dvc.yaml").read_text())["stages"])
    assert list(stages) == [s for s in main[main.index("prepare"):main.index("evaluate") + 1]
                            if s not in ("models", "budget")]
    assert stages["prepare"]["cmd"] == "jouleroute --params loops/tiny/params.yaml prepare"
    assert "loops/tiny/data/prompts.jsonl" in stages["prepare"]["deps"]
    assert "loops/tiny/data/feedback.csv" in stages["labels"]["deps"]
    assert all(s["wdir"] == "../.." for s in stages.values())
    params = load_params(ws.params_file)
    assert params.prepare.source == "prompts" and params.labels.source == "vote"
    assert params.paths.profile == "loops/tiny/artifacts/tournament/profile.parquet"
    assert params.paths.mlflow_db == "mlruns/loop-tiny/mlflow.db"
    served = load_params(ws.serve_params)
    assert served.paths.evaluate_dir == "loops/tiny/serving" and served.gateway.capture.folder == "capture"
    assert served.gateway.reload_poll_s > 0


def test_better_is_promoted_and_served_worse_is_refused_and_both_are_mlflow_runs(workspace):
    from mlflow import MlflowClient

    from jouleroute.gateway.build import build_gateway, policy_version
    from jouleroute.gateway.reload import LiveGateway

    ws = workspace
    first = _iteration(ws, deployed="tiny-b")
    assert first["decision"] == "promote" and first["reason"] == "nothing served yet: the first version"
    serve = _serve_params(ws)
    gateway = build_gateway(serve, ws.root)
    assert gateway.version == first["served"] == serving.policy_version(serving.serving_folder(ws.serving))
    live = LiveGateway(gateway, rebuild=lambda old: build_gateway(serve, ws.root, reuse=old),
                       watch=ws.serving / "champion" / "champion.json", poll_s=0.05)

    better = _iteration(ws, deployed="tiny-a")
    assert better["decision"] == "promote", better["reason"]
    assert better["gate"]["candidate"]["accuracy"] > better["gate"]["serving"]["accuracy"]
    assert better["gate"]["energy_ratio"] < 1
    assert better["served"] != first["served"]
    # the version the gate compared is the version promoted and served: stamping trained_on changes neither
    assert better["candidate_version"] == better["served"] == better["gate"]["candidate_version"]
    shift = better["gate"]["drift"]  # the gateway's drift figure on the newest traffic, in the report
    assert 0 <= shift["share"] <= 1 and shift["task_mix_newest"] == shift["task_mix_training"] == {"user": 1.0}
    assert live._fingerprint() != live._seen  # the file watch sees the swap ...
    outcome = asyncio.run(live.reload("file watch"))  # ... and the reload serves the new version
    assert outcome == {"why": "file watch", "from": first["served"], "to": better["served"], "error": None}
    assert live.current.version == better["served"] == policy_version(serve, serve.gateway, ws.root,
                                                                       json.loads((ws.serving / "champion" /
                                                                                   "champion.json").read_text()))
    previous = ws.root / better["promotion"]["previous_folder"]
    assert (previous / "champion.json").is_file()  # the old version is kept for rollback

    worse = _iteration(ws, deployed="tiny-b")
    assert worse["decision"] == "refuse"
    assert "accuracy" in worse["reason"] and worse["gate"]["accuracy_diff_ci"][1] < 0
    assert worse["served"] == better["served"] == serving.policy_version(serving.serving_folder(ws.serving))
    assert live._fingerprint() == live._seen  # nothing to reload

    assert serving.rollback(ws.serving) == previous.resolve()  # and back, when asked
    assert serving.policy_version(serving.serving_folder(ws.serving)) == first["served"]

    client = MlflowClient(tracking_uri=f"sqlite:///{ws.root / 'mlruns/loop-tiny/mlflow.db'}")
    exp = client.get_experiment_by_name("jouleroute-loop-tiny").experiment_id
    runs = client.search_runs([exp], filter_string="tags.run_kind = 'loop'", order_by=["attributes.start_time ASC"])
    assert [r.data.tags["decision"] for r in runs] == ["promote", "promote", "refuse"]
    assert [r.info.run_id for r in runs] == [e["mlflow_run_id"] for e in (first, better, worse)]
    assert runs[1].data.metrics["promoted"] == 1 and runs[2].data.metrics["promoted"] == 0
    assert runs[2].data.metrics["accuracy_diff_ci.high"] < 0
    assert runs[2].data.tags["served_version"] == better["served"]
    # the compared joules carry their source (the tiny profile's are estimated), as every stage's run does
    assert runs[1].data.tags["energy_source"] == runs[2].data.tags["energy_source"] == "estimated"
    assert runs[2].data.tags["data.prompts.path"] == "loops/tiny/data/prompts.jsonl"
    assert {a.path for a in client.list_artifacts(runs[2].info.run_id)} == {"decision.json", "plots"}
    report = [json.loads(l) for l in ws.report_jsonl.read_text().splitlines()]
    assert [e["decision"] for e in report] == ["promote", "promote", "refuse"]
    assert "**refuse**" in ws.report_md.read_text()
    asyncio.run(live.aclose())


def test_main_params_fixture_is_a_valid_params_file(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(main_params()))
    assert [c.candidate_id for c in load_params(path).pool] == list(CANDIDATES)


def test_the_main_pipelines_champion_is_adopted_first_and_without_its_queries_drift_says_why(workspace, caplog):
    """`--init` serves the main pipeline's deployed policy as version 1 (loop/init.adopt); adopted without the
    main pipeline's queries (its prepare never ran here) it warns, and the gate's drift names the reason."""
    import logging

    from jouleroute.loop.init import adopt
    from tests.loop.conftest import single_champion

    ws = workspace
    main_champion = single_champion(ws.root / "artifacts/evaluate/champion", "tiny-b")
    with caplog.at_level(logging.WARNING, logger="jouleroute.loop.init"):
        first = adopt(ws, main_champion, ws.root / "artifacts/prepare/queries.parquet",
                      ws.root / "artifacts/labels/profile.parquet")
    assert "without its training queries" in caplog.text and "artifacts/prepare/queries.parquet" in caplog.text
    assert serving.serving_folder(ws.serving) == first.resolve()
    params = load_params(ws.params_file)
    pipeline_outputs(ws, params, "tiny-a", ACCURATE, ENERGY)
    fold_step(ws, params)
    gate = gate_step(ws, params, ws.config())
    assert gate["serving_version"] == serving.policy_version(first)
    assert "holds no queries.parquet" in gate["drift"]["skipped"]


def test_the_policy_served_now_is_not_promoted_again_and_versions_never_reuse_a_number(workspace, tmp_path):
    from jouleroute.loop.init import init_loop
    from jouleroute.loop.workspace import LoopError
    from tests.loop.conftest import single_champion

    ws = workspace
    first = _iteration(ws, deployed="tiny-a")
    again = _iteration(ws, deployed="tiny-a")  # the same champion: the same version as the one served
    assert again["decision"] == "refuse" and "the same version" in again["reason"]
    assert again["served"] == first["served"] and len(list(serving.versions_dir(ws.serving).glob("v*"))) == 1

    champion = single_champion(tmp_path / "evaluate" / "champion", "tiny-b")  # numbers after pruning: one past
    made = [serving.write_version(ws.serving, ws.root, champion, tmp_path / "none", tmp_path / "none", {})
            for _ in range(3)]  # the highest kept, never a count that a pruned version frees again
    serving.prune(ws.serving, keep=2)
    newest = serving.write_version(ws.serving, ws.root, champion, tmp_path / "none", tmp_path / "none", {})
    assert [p.parent.name[:5] for p in made] == ["v0002", "v0003", "v0004"] and newest.parent.name[:5] == "v0005"

    other = Workspace(ws.root, ws.root / "loops" / "other")  # --labels reference:<id> outside the pool: refused
    with pytest.raises(LoopError, match=r"'tiny-c' is not a candidate of the pool \(tiny-a, tiny-b\)"):
        init_loop(other, capture="capture", labels="reference:tiny-c")
    assert not other.folder.exists()  # before the first tournament, nothing written


@pytest.mark.parametrize("line, says", [
    ("capture: 2024-01-01\n", r"capture: YAML reads 2024-01-01 as a date, not text: quote it"),
    ("capture: a\ncapture: b\n", r"'capture' is given twice in one mapping \(first at line 1\); keep one"),
])
def test_a_loop_config_date_or_repeated_key_is_refused_in_one_line(workspace, line, says):
    """The loop's own config is read as strictly as a params file: a date is not turned into text, and a second
    `capture:` does not silently replace the first."""
    from jouleroute.loop.workspace import LoopError

    kept = yaml.safe_load(workspace.config_file.read_text())
    kept.pop("capture")
    workspace.config_file.write_text(line + yaml.safe_dump(kept))
    with pytest.raises(LoopError, match=says) as refused:
        workspace.config()
    assert str(workspace.config_file) in str(refused.value) and "\n" not in str(refused.value)
