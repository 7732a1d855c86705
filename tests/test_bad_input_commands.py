"""docs/bad-input.md's stage and params rows: each case (tests/bad_input_commands.py) runs the real CLI in a
scratch project, exits 1 with one line, changes no file, and prints the line the table shows.
"""

from __future__ import annotations

import pytest

from tests.bad_input_commands import PARAMS_CASES, STAGE_CASES, Case, run_cli_case
from tests.bad_input_doc import REGENERATE, documented


@pytest.mark.parametrize("case", STAGE_CASES + PARAMS_CASES, ids=lambda c: f"{c.name}: {c.what}")
def test_each_bad_input_is_one_line_and_changes_nothing(case, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line, before, after = run_cli_case(case, tmp_path)
    assert line.startswith(f"jouleroute {case.name}: "), line
    assert after == before, "the refused command changed or added files"
    assert documented().get((f"`jouleroute {case.command}`", case.what)) == line, REGENERATE


def test_a_gateway_config_date_is_refused_not_read_as_text(tmp_path, monkeypatch):
    """`serve --config` reads YAML as the params file does: an unquoted date was turned into text silently."""
    monkeypatch.chdir(tmp_path)
    case = Case("serve --config bad.yaml", "a date where text is meant", params="gateway:\n  host: 2024-01-01\n")
    line, before, after = run_cli_case(case, tmp_path)
    assert line == ("jouleroute serve: bad.yaml: not a valid gateway config: gateway.host: YAML reads 2024-01-01 as a "
                    'date, not text: quote it where text is meant (host: "2024-01-01")'), line
    assert after == before
