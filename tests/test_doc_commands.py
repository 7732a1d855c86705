"""The commands README.md and docs/*.md show exist: every `jouleroute ...` command (and the options it shows) is
one the CLI's parser has, and every `make <target>` a rule of the Makefile. Read from the code blocks and inline
code of the documents, and from the parsers themselves (argparse, the Makefile), so a renamed command or a
removed target fails here, not in a newcomer's shell."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Names a document shows on purpose although no such command exists, and why.
HYPOTHETICAL = {
    ("architecture.md", "calibrate"): "the worked example of adding a stage",
}
GLOBAL_VALUED = ("--params",)  # the global options that take a value (jouleroute/cli.py _common_options)
FORWARDED = ("repro", "exp", "flow")  # their further arguments go to `dvc repro`, `dvc exp`, `jouleroute-flow`
EXP_OWN = ("save", "run", "show", "apply")  # jouleroute/commands/exp.py; any other action goes to `dvc exp`


def code_lines(text: str) -> list[str]:
    """The lines of every fenced code block and every inline code span, comments cut."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    lines = [line for block in blocks for line in block.splitlines()] + re.findall(r"`([^`\n]+)`", prose)
    return [re.split(r"\s#\s?", line)[0] for line in lines]


def shown(program: str) -> list[tuple[str, list[str]]]:
    """(document, the words after ``program``) for every command line a document shows."""
    pattern = re.compile(rf"(?:^|(?<=[\s;(&|$]))(?:\./)?(?:\.venv/bin/)?{program}(?=\s)(.*)")
    found = []
    for document in DOCUMENTS:
        for line in code_lines(document.read_text()):
            for match in pattern.finditer(line):
                try:
                    words = shlex.split(match.group(1))
                except ValueError:  # an unclosed quote in a fragment: take it word by word
                    words = match.group(1).split()
                found.append((document.name, [w for w in words if w not in ("&", "&&", ";", "|")]))
    return found


def _placeholder(word: str) -> bool:
    """`<stage>`, `NAME`, `[ARGS]`, `...`: a slot for the reader, not a name to check."""
    return bool(re.search(r"[<\[]|\.\.\.", word)) or (word.isupper() and len(word) > 1)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def _dvc_exp_actions() -> set[str]:
    from dvc.cli.parser import get_main_parser

    return set(_subparsers(_subparsers(get_main_parser())["exp"]))


def jouleroute_problems() -> list[str]:
    from jouleroute.cli import build_parser

    commands = _subparsers(build_parser())
    problems, dvc_exp = [], None
    for document, words in shown("jouleroute"):
        rest = iter(words)
        command = None
        for word in rest:  # the global options before the command
            if word in GLOBAL_VALUED:
                next(rest, None)
            elif not word.startswith("-"):
                command = word
                break
        printed = command is not None and command.endswith(":")  # `jouleroute check-params: ...`: what it printed
        command = command.rstrip(":") if command else command
        if command is None or _placeholder(command) or (document, command) in HYPOTHETICAL:
            continue
        if command not in commands:
            problems.append(f"{document}: `jouleroute {' '.join(words)}`: no command '{command}' "
                            f"(known: {', '.join(sorted(commands))})")
            continue
        after = list(rest)
        if command == "exp" and after and not _placeholder(after[0]):
            dvc_exp = dvc_exp if dvc_exp is not None else _dvc_exp_actions()
            for action in after[0].split("|"):
                if action not in EXP_OWN and action not in dvc_exp:
                    problems.append(f"{document}: `jouleroute exp {action}`: neither jouleroute's nor dvc exp's")
        if command in FORWARDED or printed:  # a printed line's words are a message, not arguments
            continue
        parser = commands[command]
        for word in after:
            if word.startswith("-") and not _placeholder(word):
                option = word.split("=", 1)[0]
                if option not in parser._option_string_actions:
                    problems.append(f"{document}: `jouleroute {' '.join(words)}`: `{command}` has no option {option}")
        positional = [a for a in parser._actions if a.choices and not a.option_strings]
        values = [w for w in after if not w.startswith("-")]
        for action, value in zip(positional, values):
            if not _placeholder(value) and value not in action.choices:
                problems.append(f"{document}: `jouleroute {' '.join(words)}`: '{value}' is not one of "
                                f"{sorted(action.choices)}")
    return problems


def make_targets() -> set[str]:
    """Every rule's target in the Makefile (a target-specific variable line names its target too)."""
    text = (REPO / "Makefile").read_text()
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_-][A-Za-z0-9_.-]*)\s*:(?!=)", text, re.M)}


def make_problems() -> list[str]:
    targets, problems = make_targets(), []
    for document, words in shown("make"):
        target = next((w for w in words if "=" not in w and not w.startswith("-")), None)
        if target is None or _placeholder(target):
            continue
        if target not in targets:
            problems.append(f"{document}: `make {' '.join(words)}`: the Makefile has no target '{target}'")
    return problems


def test_every_jouleroute_command_the_docs_show_exists():
    assert [words for _, words in shown("jouleroute")], "no jouleroute command found: the extraction is broken"
    problems = jouleroute_problems()
    assert not problems, "\n".join(problems)


def test_every_make_target_the_docs_show_exists():
    assert [words for _, words in shown("make")], "no make command found: the extraction is broken"
    problems = make_problems()
    assert not problems, "\n".join(problems)


def test_every_rule_that_makes_no_file_is_phony():
    """`make test-slow` must run even if a file of that name appears; the installed venv's stamp is a file."""
    text = (REPO / "Makefile").read_text()
    phony = set(" ".join(re.findall(r"^\.PHONY:((?:.*\\\n)*.*)", text, re.M)).replace("\\\n", " ").split())
    assert make_targets() - phony == set(), sorted(make_targets() - phony)


@pytest.mark.parametrize("line,expected", [
    ("`jouleroute nonsense`", "no command 'nonsense'"),
    ("`jouleroute serve --nope`", "`serve` has no option --nope"),
    ("`jouleroute data fecth`", "'fecth' is not one of"),
    ("`jouleroute exp sav baseline`", "neither jouleroute's nor dvc exp's"),
    ("`make tset`", "no target 'tset'"),
])
def test_a_wrong_command_in_a_document_is_caught(tmp_path, monkeypatch, line, expected):
    document = tmp_path / "README.md"
    document.write_text(f"Run {line} first.\n")
    monkeypatch.setitem(globals(), "DOCUMENTS", [document])
    problems = jouleroute_problems() + make_problems()
    assert len(problems) == 1 and expected in problems[0], problems


def test_the_readme_stage_table_has_a_row_for_every_stage():
    """The table under the stage order names every stage of dvc.yaml, in its order (a row may hold two)."""
    from jouleroute.stages.table import stage_order

    text = (REPO / "README.md").read_text()
    table = text[text.index("| stage | what it does | output |"):]
    table = table[:table.index("\n\n")]
    named = [name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])]
    assert named == stage_order(REPO / "dvc.yaml")
