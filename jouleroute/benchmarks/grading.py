"""Grade one model output against a gold answer. Grading never raises.

An output with no extractable answer is ``invalid``: scored wrong and counted separately, so a
model that rambles is distinguishable from one that answers wrongly. A query without gold is read,
not graded (:func:`ungraded`): its answer is extracted, its correctness is ``None``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from dataclasses import dataclass
from typing import Sequence

from math_verify import parse, verify

from jouleroute.benchmarks.extract import (
    answer_span,
    extract_label,
    extract_letter,
    extract_line,
    extract_number,
    parse_number,
)

log = logging.getLogger(__name__)

LABEL_SETS = (("True", "False"), ("Yes", "No"), ("valid", "invalid"))
_DYCK_CHARS = set("()[]{}<> ")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")  # "\$36" is a dollar amount, not a math delimiter


@dataclass(frozen=True)
class Grade:
    correct: bool | None  # None: ungraded (the query has no gold answer)
    invalid: bool
    extracted: str | None


INVALID = Grade(correct=False, invalid=True, extracted=None)


def ungraded(grade: Grade) -> Grade:
    """What was read from an output, without a verdict: for a query nobody graded."""
    return Grade(None, grade.invalid, grade.extracted)


def grade_number(output: str, gold: str) -> Grade:
    """Numeric equality, so "1,234", "$1234.00" and "1234" all match gold "1234"."""
    extracted = extract_number(output)
    if extracted is None:
        return INVALID
    return Grade(parse_number(extracted) == parse_number(gold), False, extracted)


def grade_choice(output: str, gold: str, choices: Sequence[str] = ()) -> Grade:
    """Option letter match; a letter beyond the options (E when there are four) is invalid."""
    letter = extract_letter(output, choices)
    if letter is None:
        return INVALID
    if choices and ord(letter) - ord("A") >= len(choices):
        return Grade(False, True, letter)
    return Grade(letter == gold.strip("() ").upper(), False, letter)


# --- MATH: symbolic equivalence with math-verify --------------------------------------------
def _timeout() -> int | None:
    # math-verify times out with signal.alarm, which only works in the main thread; elsewhere
    # (a Prefect worker thread) it must be switched off or every call raises.
    return 5 if threading.current_thread() is threading.main_thread() else None


def _parse_math(text: str) -> list:
    try:
        return parse(text, parsing_timeout=_timeout())
    except Exception as exc:  # noqa: BLE001 - sympy raises many types on odd LaTeX; unparsable is an answer
        log.debug("math-verify could not parse %r: %s", text[:80], exc)
        return []


@functools.lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple:
    return tuple(_parse_math(f"\\boxed{{{gold}}}"))


def _looks_like_bare_answer(output: str) -> bool:
    """One line with at most one English word: a few-shot completion such as " \\frac43" or
    " x^2+1", which needs wrapping to be read as LaTeX, rather than a sentence."""
    line = output.strip()
    words = [w for w in line.split() if re.fullmatch(r"[A-Za-z]{2,}[.,]?", w)]
    return bool(line) and "\n" not in line and len(words) <= 1


def extract_math(output: str) -> list:
    """math-verify's parse of the explicit answer, else of the whole output (it takes the last
    expression). An undelimited answer is wrapped in \\boxed so "2k+2" reads as LaTeX, not "2"."""
    span = answer_span(output)
    if span is None:
        if not _looks_like_bare_answer(output) or _UNESCAPED_DOLLAR.search(output):
            return _parse_math(output)
        span = output.strip()
    if _UNESCAPED_DOLLAR.search(span) or "\\(" in span or "\\[" in span:  # already delimited
        return _parse_math(span)
    bare = re.split(r"\.\s", span, maxsplit=1)[0].strip().rstrip(".")  # drop a trailing sentence
    return _parse_math(f"\\boxed{{{bare}}}") or _parse_math(span)


def grade_math(output: str, gold: str) -> Grade:
    parsed = extract_math(output)
    if not parsed:
        return INVALID
    extracted = str(parsed[-1])
    gold_parsed = _parse_gold(gold)
    try:
        correct = bool(verify(list(gold_parsed), parsed, timeout_seconds=_timeout())) if gold_parsed else False
    except Exception as exc:  # noqa: BLE001 - a comparison sympy cannot do counts as not equal
        log.debug("math-verify could not compare %r with %r: %s", extracted, gold, exc)
        correct = False
    return Grade(correct, False, extracted)


# --- BBH: the gold target's shape decides how to read the output -------------------------------
def bbh_target_kind(gold: str) -> str:
    """letter "(A)" | label True/False, Yes/No, valid/invalid | number | dyck brackets | text."""
    if re.fullmatch(r"\([A-Z]\)", gold):
        return "letter"
    if any(gold.casefold() in {a.casefold(), b.casefold()} for a, b in LABEL_SETS):
        return "label"
    if re.fullmatch(r"-?\d+", gold):
        return "number"
    if set(gold) <= _DYCK_CHARS:
        return "dyck"
    return "text"


def _norm_words(text: str) -> str:
    return " ".join(text.replace(",", " ").strip().rstrip(".").split()).casefold()


def grade_bbh(output: str, gold: str, choices: Sequence[str] = ()) -> Grade:
    kind = bbh_target_kind(gold)
    if kind == "letter":
        grade = grade_choice(output, gold, choices)
        return Grade(grade.correct, grade.invalid, f"({grade.extracted})" if grade.extracted else None)
    if kind == "number":
        return grade_number(output, gold)
    if kind == "label":
        labels = next(pair for pair in LABEL_SETS if gold.casefold() in {p.casefold() for p in pair})
        label = extract_label(output, labels)
        return INVALID if label is None else Grade(label.casefold() == gold.casefold(), False, label)
    line = extract_line(output)
    if kind == "dyck":
        # Only the trailing run of brackets: "The closing sequence is ] ) >" -> "] ) >".
        run = re.search(r"[()\[\]{}<>][()\[\]{}<>\s]*$", (line or "").rstrip(". "))
        if run is None:
            return INVALID
        extracted = " ".join(run.group().split())
        return Grade(extracted.replace(" ", "") == gold.replace(" ", ""), False, extracted)
    if line is None:
        return INVALID
    return Grade(_norm_words(line) == _norm_words(gold), False, line)
