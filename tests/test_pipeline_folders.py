"""Every study (and a pool of `jouleroute import --init`) is a pipeline of the one DVC repository (issue 41): its stages
run at the root (``wdir``), every path in any params file is relative to the root, and `repro` and `exp` leave DVC's
arguments as the user wrote them, naming only the study's dvc.yaml (and, for a file-less ``-S``, its params file)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from jouleroute.commands.exp import aimed, dropped
from jouleroute.commands.pool_init import render
from jouleroute.commands.repro import targeted
from jouleroute.stages import StageFailed
from jouleroute.stages.context import StageContext

REPO = Path(__file__).resolve().parents[1]


def _study(root: Path) -> Path:
    for rel in ("params.yaml", "dvc.yaml", "studies/replay/params.yaml", "studies/replay/dvc.yaml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, root / rel)
    return root / "studies/replay"


def test_repro_names_the_study_s_dvc_yaml_and_passes_the_rest_as_written(tmp_path):
    _study(tmp_path)
    main = SimpleNamespace(root=tmp_path, params_path=tmp_path / "params.yaml")
    study = SimpleNamespace(root=tmp_path, params_path=tmp_path / "studies/replay/params.yaml")
    assert targeted(main, ["-f"]) == ["dvc.yaml", "-f"]
    assert targeted(main, ["-f", "evaluate"]) == ["-f", "evaluate"]
    assert targeted(study, ["-f", "--dry"]) == ["studies/replay/dvc.yaml", "-f", "--dry"]
    assert targeted(study, ["-s", "studies/replay/dvc.yaml:sft"]) == ["-s", "studies/replay/dvc.yaml:sft"]
    with pytest.raises(StageFailed, match=r"`sft` names the main pipeline's stage; this study's is "
                                          r"studies/replay/dvc.yaml:sft"):
        targeted(study, ["-f", "sft"])  # DVC would run the main pipeline's sft, and everything before it
    assert targeted(study, ["-n", "sft", "-S", "a=1"], ("-n", "-S")) == ["studies/replay/dvc.yaml", "-n", "sft", "-S", "a=1"]


def test_exp_aims_a_set_param_that_names_no_file_at_the_pipeline_s_params_file():
    mine = "studies/replay/params.yaml"
    argv = ["-S", "router.lam=1", "--set-param", "sft.epochs=2", "--set-param=grpo.max_steps=3", "-n", "x",
            "-S", "params.yaml:router.lam=2", f"--set-param={mine}:evaluate.lambdas=[0.1,1]"]
    assert aimed(argv, mine) == [
        "-S", f"{mine}:router.lam=1", "--set-param", f"{mine}:sft.epochs=2", f"--set-param={mine}:grpo.max_steps=3",
        "-n", "x", "-S", "params.yaml:router.lam=2", f"--set-param={mine}:evaluate.lambdas=[0.1,1]"]


def test_exp_show_keeps_the_pipeline_s_own_params_and_metrics():
    main, study = re.compile(dropped("dvc.yaml")), re.compile(dropped("studies/replay/dvc.yaml"))
    kept = ("router.lam", "params.yaml:router.lam", "metrics.json:acc")
    assert not any(main.match(c) for c in kept) and main.match("studies/replay/metrics.json:acc")
    assert not any(study.match(c) for c in (*kept, "studies/replay/params.yaml:router.lam",
                                           "studies/replay/metrics.json:acc"))
    for dropped_column in ("jouleroute/training", "studies/replay/artifacts/sft", "studies/cruxeval/metrics.json:acc"):
        assert main.match(dropped_column) and study.match(dropped_column)


def test_a_missing_input_names_a_command_that_makes_it(tmp_path):
    study = _study(tmp_path)
    own = StageContext.load(study / "params.yaml", root=tmp_path)
    assert own.repro_hint("router_data") == "dvc repro studies/replay/dvc.yaml:router_data"
    assert own.repro_hint("models") == "dvc repro models"  # the main pipeline's
    shutil.copy2(study / "params.yaml", study / "mine.yaml")  # a copy beside the study reads the study's outputs
    mine = StageContext.load(study / "mine.yaml", root=tmp_path)
    assert mine.namespace == "mine" and mine.repro_hint("router_data") == "dvc repro studies/replay/dvc.yaml:router_data"
    shutil.copy2(tmp_path / "params.yaml", tmp_path / "copy.yaml")  # a copy of params.yaml writes outputs of its own
    copy = StageContext.load(tmp_path / "copy.yaml", root=tmp_path)
    assert copy.repro_hint("tournament") == "jouleroute --params copy.yaml tournament"  # `repro` refuses a copy
    assert copy.repro_hint("models") == "dvc repro models"  # the converted models are shared


def test_import_init_writes_a_pool_that_runs_at_the_root_with_its_table_as_given():
    files = render("pools/mine", "/data/mine.csv")
    params, dvc = yaml.safe_load(files["pools/mine/params.yaml"]), yaml.safe_load(files["pools/mine/dvc.yaml"])
    assert params["import_outcomes"]["input_file"] == "/data/mine.csv"
    assert dvc["stages"]["import"]["deps"][0] == "/data/mine.csv"
    assert {stage["wdir"] for stage in dvc["stages"].values()} == {"../.."}
    assert params["paths"]["profile"] == "pools/mine/artifacts/profile.parquet"
    assert params["paths"]["study_doc"] == "pools/mine/report.md" and params["paths"]["models_dir"] == "artifacts/models"
    assert {stage["wdir"] for stage in yaml.safe_load(render("mine", None)["mine/dvc.yaml"])["stages"].values()} == {".."}
