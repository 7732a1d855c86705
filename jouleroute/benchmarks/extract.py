"""Pull a final answer out of free model output. Nothing here raises: a miss returns None.

Every extractor first looks for an explicit final answer, the last of ``\\boxed{...}``,
``Answer: X``, ``the answer is X`` or ``#### X``, and only without one falls back to a
looser reading of the whole output (last number, leading option letter, ...).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Sequence

# "Answer: X", "answer is X", "**Final Answer:** X", "#### X" (GSM8K's own format).
_MARKER = re.compile(r"\banswer\b[\s*_]*(?:is\b|:)|####", re.IGNORECASE)
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# Thousands separators only in groups of three, so "3, 4" stays two numbers.
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\w.\d])-?\.\d+")
_WRAPPING = " \t*_`$:"
_PLACEHOLDER = re.compile(r"[\s$(*]*<[A-Za-z][^<>]*>[\s$).*]*")
_OPTION_LINE = re.compile(r"^\s*\(?([A-Z])[.)]", re.MULTILINE)


def last_boxed(text: str) -> tuple[int, str] | None:
    """(position, content) of the last ``\\boxed{...}``, with nested braces balanced."""
    matches = list(_BOXED.finditer(text))
    for match in reversed(matches):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return match.start(), text[start:i]
    return None


def answer_span(text: str) -> str | None:
    """The explicit final answer: the later of the last boxed content and the text after the
    last answer marker (to the end of its line, or the next line when the marker ends one).
    None when there is neither; "" when a marker is followed by nothing."""
    boxed = last_boxed(text)
    markers = list(_MARKER.finditer(text))
    if markers and (boxed is None or markers[-1].start() > boxed[0]):
        rest = text[markers[-1].end() :].lstrip(" \t*_:")
        lines = [line for line in rest.split("\n") if line.strip(_WRAPPING)]
        if not lines:
            return ""  # a marker with nothing after it: an empty answer, not a missing one
        span = lines[0].strip()
        inner = last_boxed(span)  # "The answer is \boxed{5}."
        span = inner[1].strip() if inner else span
    elif boxed:
        span = boxed[1].strip()
    else:
        return None
    # A small model may copy the prompt's placeholder ("Answer: <number>"): that is no answer.
    return "" if _PLACEHOLDER.fullmatch(span) else span


def parse_number(token: str) -> Decimal | None:
    try:
        return Decimal(token.replace(",", "").replace("$", ""))
    except InvalidOperation:
        return None


def numbers_in(text: str) -> list[str]:
    # Unicode minus signs and "\!" thin spaces ("1,\!234" in LaTeX) would hide numbers.
    text = text.replace("\u2212", "-").replace("\\!", "").replace("{,}", ",")
    return _NUMBER.findall(text.replace("$", ""))


def extract_number(text: str) -> str | None:
    """First number in the explicit answer; without one, the last number in the text.

    An explicit answer that holds no number ("Answer: unknown") is a miss, not a reason to
    grab a number from the reasoning."""
    span = answer_span(text)
    found = numbers_in(span) if span is not None else numbers_in(text)[-1:]
    return found[0].replace(",", "") if found else None


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().strip(".").strip()).casefold()


def _leading_letter(span: str, strict: bool) -> str | None:
    """"(B)", "B.", "B)", "b)", "B" at the start. ``strict`` (no answer marker) refuses a bare
    capital followed by a word, since "A plant needs..." is prose, not option A."""
    span = span.strip(_WRAPPING)
    match = re.match(r"^[(\[]([A-Za-z])[)\]]", span) or re.match(r"^([A-Za-z])[.):](?=\s|$)", span)
    if match:
        return match.group(1).upper()
    if re.fullmatch(r"[A-Z]", span) or (not strict and re.match(r"^([A-Z])(?=[\s,;]|$)", span)):
        return span[0]
    return None


def _option_by_text(text: str, choices: Sequence[str]) -> str | None:
    """The letter of the one option whose text the answer equals or, failing that, contains."""
    norm = _norm(text)
    options = [_norm(c) for c in choices]
    exact = [i for i, option in enumerate(options) if option and option == norm]
    if len(exact) == 1:
        return chr(ord("A") + exact[0])
    inside = [i for i, o in enumerate(options) if o and re.search(rf"(?<!\w){re.escape(o)}(?!\w)", norm)]
    return chr(ord("A") + inside[0]) if len(inside) == 1 else None


def extract_letter(text: str, choices: Sequence[str] = ()) -> str | None:
    """An option letter (upper case) read from the explicit answer, or from the whole output
    when there is none: a leading letter, else the one option whose text appears, else the one
    distinct "(X)" mentioned. An output that only lists the options back picks none."""
    span = answer_span(text)
    if span is None and len(set(_OPTION_LINE.findall(text))) > 1:
        return None  # the output lists the options back ("A. ...\nB. ..."), it does not pick one
    where = span if span is not None else text
    letter = _leading_letter(where, strict=span is None) or _option_by_text(where, choices)
    if letter:
        return letter
    mentioned = set(re.findall(r"\(([A-Z])\)", where))
    return mentioned.pop() if len(mentioned) == 1 else None


def extract_label(text: str, labels: Sequence[str]) -> str | None:
    """One of a closed set of words (True/False, Yes/No, valid/invalid), case-insensitive.
    Word boundaries keep "invalid" from reading as "valid"."""
    span = answer_span(text)
    where = span if span is not None else text
    first = re.match(r"[\W_]*(\w+)", where)
    by_lower = {label.casefold(): label for label in labels}
    if first and first.group(1).casefold() in by_lower:
        return by_lower[first.group(1).casefold()]
    present = {by_lower[w.casefold()] for w in re.findall(r"\w+", where) if w.casefold() in by_lower}
    return present.pop() if len(present) == 1 else None


def extract_line(text: str) -> str | None:
    """Free-text answer: the explicit answer, else the last non-empty line."""
    span = answer_span(text)
    if span is not None:
        return span.strip(_WRAPPING) or None
    lines = [line.strip(_WRAPPING) for line in text.strip().split("\n") if line.strip(_WRAPPING)]
    return lines[-1] if lines else None
