"""docs/bad-input.md's stage and params rows: each case (tests/bad_input_commands.py) runs the real CLI in a
scratch project, exits 1 with one line, changes no file, and prints the line the table shows.
"""

from __future__ import annotations

import pytest

from tests.bad_input_commands import PARAMS_CASES, STAGE_CASES, run_cli_case
from tests.bad_input_doc import REGENERATE, documented


@pytest.mark.parametrize("case", STAGE_CASES + PARAMS_CASES, ids=lambda c: f"{c.name}: {c.what}")
def test_each_bad_input_is_one_line_and_changes_nothing(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line, before, after = run_cli_case(case, tmp_path)
    assert line.startswith(f"jouleroute {case.name}: "), line
    assert after == before, "the refused command changed or added files"
    assert documented().get((f"`jouleroute {case.command}`", case.what)) == line, REGENERATE
