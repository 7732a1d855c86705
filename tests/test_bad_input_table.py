"""docs/bad-input.md's table is what the commands print: every row's case runs in the tests, and the table is
generated from these runs (`.venv/bin/python -m tests.test_bad_input_table` rewrites it; the tests fail when it
differs).

The stage and params cases and how one runs: tests/bad_input_commands.py (its test: test_bad_input_commands.py);
the gateway cases: tests/bad_input_gateway.py (test_bad_input_gateway.py); the block read back and rendered:
tests/bad_input_doc.py. Here: the block holds every case's row and no other, and `main` rewrites it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.bad_input_commands import PARAMS_CASES, STAGE_CASES, run_cli_case
from tests.bad_input_doc import BEGIN, DOC, END, REGENERATE, REPO, documented, render
from tests.bad_input_gateway import GATEWAY_CASES, run_gateway_case


def test_the_table_lists_every_case_and_nothing_else():
    """The generated block is exactly the cases' rows (a removed case leaves no stale row behind)."""
    expected = {(f"`jouleroute {c.command}`", c.what) for c in STAGE_CASES + PARAMS_CASES}
    assert {key for key in documented() if key[0].startswith("`jouleroute")} == expected, REGENERATE
    assert [what for what, _ in documented() if not what.startswith("`jouleroute")] == \
        [c.what for c in GATEWAY_CASES], REGENERATE


def main() -> int:
    """Rewrite docs/bad-input.md's generated block from fresh runs of every case."""
    import tempfile

    import os

    stage_lines, params_lines, cwd = [], [], os.getcwd()
    try:
        for cases, lines in ((STAGE_CASES, stage_lines), (PARAMS_CASES, params_lines)):
            for case in cases:
                with tempfile.TemporaryDirectory() as folder:
                    os.chdir(folder)
                    lines.append(run_cli_case(case, Path(folder))[0])
                    os.chdir(cwd)
    finally:
        os.chdir(cwd)
    gateway = [run_gateway_case(case) for case in GATEWAY_CASES]
    text = DOC.read_text()
    new = text[:text.index(BEGIN) + len(BEGIN)] + "\n" + render(stage_lines, params_lines, gateway) + "\n" + \
        text[text.index(END):]
    DOC.write_text(new)
    print(f"{DOC.relative_to(REPO)}: {len(stage_lines) + len(params_lines) + len(gateway)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
