"""docs/bad-input.md's generated block: reading its rows back (what the tests compare each case's line with) and
rendering it from the lines of fresh runs (tests/test_bad_input_table.py's `main`).
"""

from __future__ import annotations

import re

from tests.bad_input_commands import PARAMS_CASES, REPO, STAGE_CASES
from tests.bad_input_gateway import GATEWAY_CASES, UPSTREAM_URL

DOC = REPO / "docs" / "bad-input.md"
BEGIN, END = "<!-- generated:bad-input:begin (tests/test_bad_input_table.py) -->", "<!-- generated:bad-input:end -->"
REGENERATE = "docs/bad-input.md differs from what runs: .venv/bin/python -m tests.test_bad_input_table rewrites it"


def _cell(text: str) -> str:
    """``text`` as a table cell's code span: double backticks, so the backticks a message holds stay inside."""
    return "`` " + text.replace("|", "\\|") + " ``"


ROW = re.compile(r"^\| (.+?) \| (.+?) \| `` (.*) `` \|$")


def documented() -> dict[tuple[str, str], str]:
    """(command or request, input or status) -> the line, from docs/bad-input.md's generated block."""
    rows = {}
    for line in block(DOC.read_text()).splitlines():
        match = ROW.match(line)
        if match:
            first, second, shown = match.groups()
            rows[(first, second)] = shown.replace("\\|", "|")
    return rows


def same(a: str, b: str) -> bool:
    """Equal but for durations (a rate limit's "1 in 0.0 s" is measured)."""
    return re.sub(r"\d+\.\d+ s\b", "# s", a) == re.sub(r"\d+\.\d+ s\b", "# s", b)


def render(stage_lines: list[str], params_lines: list[str], gateway: list[tuple[str, str]]) -> str:
    out = ["### Stage inputs", "", "Run in the project root; paths are the defaults of `paths:`.", "",
           "| command | input | what you see (stderr, exit status 1) |", "|---|---|---|"]
    out += [f"| `jouleroute {c.command}` | {c.what} | {_cell(line)} |" for c, line in zip(STAGE_CASES, stage_lines)]
    out += ["", "### Params", "", "`jouleroute check-params` here; every command that reads the params file prints "
            "the same line (after its own name), and `make run` stops there before DVC starts. `jouleroute-flow` "
            "prints it after `jouleroute-flow:` and exits 2, as it does for every refusal before a flow starts.", "",
            "| command | params file | what you see (stderr, exit status 1) |", "|---|---|---|"]
    out += [f"| `jouleroute {c.command}` | {c.what} | {_cell(line)} |" for c, line in zip(PARAMS_CASES, params_lines)]
    out += ["", "### Gateway requests", "", "`POST /v1/completions` (or `/v1/chat/completions`) to `jouleroute serve` "
            "with the limits `max_prompt_tokens: 64`, `max_body_bytes: 4096` and a router trained on the task "
            "`arith`; the answer is OpenAI's error shape, "
            "`{\"error\": {\"message\": ..., \"type\": ..., \"code\": ...}}`, "
            f"with an `X-Request-Id` header. The hanging upstream is `{UPSTREAM_URL}`. A stream's status (200) is "
            "sent with its first text: an upstream that fails after that ends the stream with an error event in the "
            "same shape, `data: {\"error\": {...}}`, after the text that came and in place of `data: [DONE]`.", "",
            "| request | status | `error.message` |", "|---|---|---|"]
    out += [f"| {c.what} | {status} | {_cell(message)} |" for c, (status, message) in zip(GATEWAY_CASES, gateway)]
    return "\n".join(out)


def block(text: str) -> str:
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")
