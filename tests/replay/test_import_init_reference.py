"""`jouleroute import --init DIR --prompts FILE --reference CANDIDATE`: the reference is checked against the pool the
new pipeline starts from before anything is written (it wrote a params file that `check-params` then refused)."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
import yaml

from jouleroute.cli import main
from tests.replay.conftest import REPO_ROOT

POOL = ("smollm2-loglik", "gemma3-loglik")  # params.yaml's pool, which the new pipeline starts from


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """A scratch project with the main pipeline's files and a one-prompt JSONL, as the working directory."""
    for name in ("params.yaml", "dvc.yaml", "studies/replay/dvc.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, tmp_path / name)
    (tmp_path / "data").mkdir()
    (tmp_path / "data/prompts.jsonl").write_text('{"messages": [{"role": "user", "content": "What is 2 plus 2?"}]}\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stderr(io.StringIO()) as stderr, contextlib.redirect_stdout(io.StringIO()):
        status = main(list(argv))
    return status, stderr.getvalue()


def test_an_unknown_reference_is_refused_in_one_line_and_nothing_is_written(project: Path):
    pool = {c["candidate_id"] for c in yaml.safe_load((project / "params.yaml").read_text())["pool"]}
    assert pool == set(POOL), "params.yaml's pool changed: update POOL"
    status, err = _cli("import", "--init", "pools/mine", "--prompts", "data/prompts.jsonl", "--reference", "nosuch")
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("jouleroute import: --reference nosuch: not a candidate of the pool"), lines[0]
    assert all(candidate in lines[0] for candidate in POOL), lines[0]
    assert not (project / "pools").exists(), "a refused --init wrote files"


def test_a_reference_of_the_pool_writes_a_params_file_check_params_accepts(project: Path):
    status, err = _cli("import", "--init", "pools/mine", "--prompts", "data/prompts.jsonl", "--reference", POOL[0])
    assert status == 0, err
    assert _cli("--params", "pools/mine/params.yaml", "check-params") == (0, "")
