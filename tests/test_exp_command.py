"""`jouleroute exp run -S ...` checks each override against the typed params before DVC rewrites the file."""

from __future__ import annotations

import shutil
from pathlib import Path

from jouleroute.commands.exp import check_overrides, overrides

REPO = Path(__file__).resolve().parents[1]


def test_overrides_aimed_at_this_params_file(tmp_path):
    params = tmp_path / "params.yaml"
    argv = ["-S", "router.lam=1.0", "--set-param=evaluate.lambdas=[0.1,1.0]", "-n", "x",
            "-S", "studies/replay/params.yaml:router.lam=2", "-S", f"{params}:sft.epochs=2"]
    assert overrides(argv, params) == ["router.lam=1.0", "evaluate.lambdas=[0.1,1.0]", "sft.epochs=2"]


def test_a_typo_or_a_wrong_type_is_one_line_and_the_file_is_untouched(tmp_path):
    params = tmp_path / "params.yaml"
    shutil.copy2(REPO / "params.yaml", params)
    before = params.read_text()
    assert check_overrides(params, ["-S", "router.lam=1.0", "-S", "pool.0.max_new_tokens=4"]) is None
    typo = check_overrides(params, ["-S", "router.lamb=1.0"])
    assert "router.lamb: unknown key (did you mean 'lam'?)" in typo and "\n" not in typo
    wrong = check_overrides(params, ["-S", "router.lam=lots"])
    assert wrong.startswith("params.yaml with -S router.lam=lots: router.lam:") and "\n" not in wrong
    assert "key=value" in check_overrides(params, ["-S", "router.lam"])
    assert params.read_text() == before


def test_hydra_prefixes_add_set_and_delete_keys_as_dvc_reads_them(tmp_path):
    """README's experiment sets a target that params.yaml lacks: `+key` adds it; without `+` DVC would refuse, so
    the check says so in one line; `+` on a key that is there, and a target that is no target, are refused too."""
    params = tmp_path / "params.yaml"
    shutil.copy2(REPO / "params.yaml", params)
    before = params.read_text()
    assert check_overrides(params, ["-S", "+router.target.energy_share=0.5", "-n", "half"]) is None
    assert check_overrides(params, ["-S", "++router.lam=1.0"]) is None
    assert check_overrides(params, ["-S", "~router.threads"]) is None
    plain = check_overrides(params, ["-S", "router.target.energy_share=0.5"])
    assert "has no router.target.energy_share yet; add it with -S +router.target.energy_share=0.5" in plain
    assert "already in params.yaml; set it with -S router.lam=1.0" in check_overrides(params, ["-S", "+router.lam=1.0"])
    bad = check_overrides(params, ["-S", "+router.target.energy_shar=0.5"])
    assert "router.target.energy_shar" in bad and "\n" not in bad
    assert params.read_text() == before


def test_values_dvc_accepts_pass_and_a_bad_index_or_value_is_one_line(tmp_path):
    params = tmp_path / "params.yaml"
    shutil.copy2(REPO / "params.yaml", params)
    assert check_overrides(params, ["-S", "router.lam=1e-3"]) is None  # Hydra reads a number; YAML 1.1, a string
    beyond = check_overrides(params, ["-S", "pool.9.max_new_tokens=3"])  # was an IndexError traceback
    assert beyond.startswith("-S pool.9.max_new_tokens=3: pool is a list of") and "index it with 0 to" in beyond
    assert "pool is a list" in check_overrides(params, ["-S", "pool.x=1"])  # was a TypeError
    unparsable = check_overrides(params, ["-S", "router.lam=[1"])  # was a YAML ParserError traceback
    assert unparsable.startswith("-S router.lam=[1: '[1' is no value") and "\n" not in unparsable
