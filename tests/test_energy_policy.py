"""One `energy_policy:` section (norm, column, mixing rule): typed, read by the stages that compare joules, each
stage depending in dvc.yaml on exactly the keys its code reads, and old per-section copies refused by name."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from jouleroute.config import MOVED_KEYS, ParamsError, load_params
from jouleroute.energy import EnergyPolicy
from jouleroute.stages import StageFailed, table
from jouleroute.stages.context import StageContext
from jouleroute.stages.router_training import training_run

REPO = Path(__file__).resolve().parents[1]
STAGES = REPO / "jouleroute" / "stages"
PARAMS_FILES = [REPO / "params.yaml", *sorted((REPO / "studies").glob("*/params.yaml"))]


def test_policy_is_typed_and_rejects_unknown_keys():
    assert EnergyPolicy() == EnergyPolicy(norm="max", column="energy_j", allow_mixed_sources=False)
    with pytest.raises(ValidationError, match="norm"):
        EnergyPolicy(norm="rank")
    with pytest.raises(ValidationError, match="column"):
        EnergyPolicy(column="energy_kwh")
    with pytest.raises(ValidationError, match="energy_norm"):
        EnergyPolicy(energy_norm="max")


@pytest.mark.parametrize("old, new", sorted(MOVED_KEYS.items()))
def test_an_old_key_fails_in_one_line_naming_file_old_and_new_key(tmp_path, old, new):
    *sections, key = old.split(".")  # gateway.router.lam: a key two sections deep
    raw = {key: "max" if "norm" in key else False}
    for section in reversed(sections):
        raw = {section: raw}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ParamsError) as err:
        load_params(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and f"{old} is now {new}" in message


def test_every_params_file_here_holds_the_policy_and_no_old_key():
    for path in PARAMS_FILES:
        raw = yaml.safe_load(path.read_text())
        assert set(raw["energy_policy"]) == set(EnergyPolicy.model_fields), path
        assert load_params(path).energy_policy == EnergyPolicy(**raw["energy_policy"]), path


def _stage_modules(stage: str) -> list[Path]:
    """The stage's module and the jouleroute.stages modules it imports (what sft and grpo share)."""
    main = STAGES / f"{stage}.py"
    found = [main]
    for node in ast.walk(ast.parse(main.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jouleroute.stages."):
            shared = STAGES / f"{node.module.rsplit('.', 1)[1]}.py"
            if shared.exists() and shared.name not in ("context.py", "table.py"):
                found.append(shared)
    return found


def policy_reads(stage: str) -> set[str]:
    """`energy_policy` (the whole section handed on) or `energy_policy.<key>`, for every read in the stage's code."""
    reads = set()
    for path in _stage_modules(stage):
        parents = {}
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "energy_policy":
                up = parents.get(node)
                reads.add(f"energy_policy.{up.attr}" if isinstance(up, ast.Attribute) else "energy_policy")
    return reads


@pytest.mark.parametrize("dvc_yaml", [table.main_dvc_yaml(REPO), *table.study_dvc_yamls(REPO)],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_each_stage_depends_on_exactly_the_policy_keys_it_reads(dvc_yaml):
    for name, stage in table.read(dvc_yaml).items():
        declared = {p for p in stage.params if p.split(".")[0] == "energy_policy"}
        reads = policy_reads(name)
        whole = "energy_policy" in reads
        assert whole == ("energy_policy" in declared), (name, reads, declared)
        if not whole:
            assert declared == reads, (name, reads, declared)
    # the reason the policy is a section of its own: the tournament (the meter) never reruns for it
    assert table.read(dvc_yaml).get("tournament") is None or policy_reads("tournament") == set()


def test_the_scan_sees_the_reads_it_is_meant_to_see():
    """The dependency test above relies on this scan; check it on stages whose reads are known."""
    assert policy_reads("validate") == {"energy_policy.allow_mixed_sources"}
    assert policy_reads("router_data") == {"energy_policy"}
    assert policy_reads("sft") == {"energy_policy.norm"}  # through stages/router_training.py


def test_training_refuses_labels_built_with_another_norm(tmp_path):
    """GRPO's reward and the held-out utility use energy_policy.norm; labels made with another norm must be
    rebuilt first (router_spec.json records the labels' norm)."""
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"energy_policy": {"norm": "log"}, "tracking": {"enabled": False},
                                      "paths": {"router_data_dir": "data"}}))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "router_spec.json").write_text(json.dumps({"energy_norm": "max"}))
    ctx = StageContext.load(params, tmp_path)
    with pytest.raises(StageFailed, match="labels built with energy norm 'max'.*energy_policy.norm: log.*router_data"):
        training_run(ctx, "grpo")
    params.write_text(yaml.safe_dump({"energy_policy": {"norm": "max"}, "tracking": {"enabled": False},
                                      "paths": {"router_data_dir": "data"}}))
    with training_run(StageContext.load(params, tmp_path), "grpo") as run:
        assert run is None  # tracking off: the stage runs without an MLflow run


def test_an_experiment_on_an_old_key_is_refused_in_one_line_before_dvc_runs():
    from jouleroute.commands.exp import check_overrides

    message = check_overrides(REPO / "params.yaml", ["-S", "grpo.energy_norm=log"])
    assert "\n" not in message and message.startswith("params.yaml with -S grpo.energy_norm=log: ")
    assert "grpo.energy_norm is now energy_policy.norm" in message and "nothing was changed" in message
    assert check_overrides(REPO / "params.yaml", ["-S", "energy_policy.norm=log"]) is None
