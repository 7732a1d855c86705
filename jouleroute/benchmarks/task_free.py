"""A task-free answer extractor: what an answer says, in a form two answers compare by, without knowing the task.

Used where no task's own grader applies: the gateway's cascade (it does not know a request's task), the
tournament's open prompts (a user's own task, outside the benchmark registry) and the labels of such prompts
(``labels.answer_matrix`` takes ``extract_answer`` as its ``task_free`` extractor). A known task is read by its
grader instead (``benchmarks.grading``; the evaluation side: ``jouleroute.cascade``). It reads, in this order
of preference:

1. the last ``\\boxed{...}`` (balanced braces), as MATH-style answers end;
2. the last answer phrase (``#### 42``, ``The answer is (B)``, ``Final answer: 1,200``), followed by an
   option letter or a number;
3. an answer that is only an option letter (``B``, ``(B)``, ``B.``);
4. the last number in the text.

Numbers are normalised exactly (``fractions.Fraction``): ``12``, ``12.0``, ``12.00`` and ``$12`` are ``12``;
``1,200`` is ``1200``; ``1/2``, ``\\frac{1}{2}`` and ``0.50`` are ``0.5``; ``1/3`` stays ``1/3``. So numbers
agree when they are numerically equal, and a fraction is never read as its denominator. An option letter is its capital,
``(b)`` is ``B``. Any other boxed content is compared as written, without spaces.

Extraction never raises: text with nothing to read gives ``None``, which never agrees with anything (the
cascade escalates; the tournament marks the row ``invalid``).
"""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+"
# a fraction first, so that "1/2" is read whole and never as "1" and "2"
NUMBER = re.compile(rf"(?<![\w.])(?:(?P<num>{_NUMBER})\s*/\s*(?P<den>{_NUMBER})|(?P<plain>{_NUMBER}))(?!\d)")
FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(-?\d+)\s*\}")
PHRASE = re.compile(r"(?:####|\banswer\s*(?:is|:|=)|\bfinal answer\b\s*(?:is|:|=)?)\s*", re.IGNORECASE)
# an option letter right after a phrase: "(B)", or "B" followed by punctuation or the end of the line
LETTER_AFTER = re.compile(r"\(([A-Ja-j])\)|([A-J])(?=[.):,;]|\s*$)", re.MULTILINE)
ONLY_LETTER = re.compile(r"^\s*(?:option\s+)?\(?([A-Ja-j])\)?[.):]?\s*$", re.IGNORECASE)
TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")


def extract_answer(text: str | None) -> str | None:
    """The normalised answer ``text`` states, or ``None`` when it states none that can be read."""
    if not text or not text.strip():
        return None
    boxed = last_boxed(text)
    if boxed is not None:
        return normalise(boxed)
    phrases = list(PHRASE.finditer(text))
    for phrase in reversed(phrases):
        found = _after_phrase(text[phrase.end():])
        if found is not None:
            return found
    only = ONLY_LETTER.match(text)
    if only:
        return only.group(1).upper()
    return _last_number(text)


def answers_agree(a: str | None, b: str | None) -> bool:
    """Two extracted answers agree when both exist and their normalised forms are equal."""
    return bool(a) and bool(b) and a == b


def normalise(raw: str) -> str | None:
    """One answer's canonical form: a number's exact value, an option's capital letter, else the text without
    spaces, ``$`` or a trailing full stop; ``None`` when nothing is left."""
    s = TEXT_WRAPPER.sub(r"\1", raw).strip().strip("$").strip()
    s = re.sub(r"\\[,!;: ]", "", s).rstrip(".").strip()  # LaTeX thin spaces, a closing full stop
    frac = FRAC.fullmatch(s)
    if frac:
        return _fraction(frac.group(1), frac.group(2))
    number = NUMBER.fullmatch(s.replace("\\%", "").rstrip("%").lstrip("$").strip())
    if number:
        return _number_of(number)
    only = ONLY_LETTER.match(s)
    if only:
        return only.group(1).upper()
    compact = re.sub(r"\s+", "", s)
    return compact or None


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced; ``None`` if there is none
    or it never closes."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


def _after_phrase(rest: str) -> str | None:
    rest = rest.lstrip(" :*\t$")
    letter = LETTER_AFTER.match(rest)
    if letter:
        return (letter.group(1) or letter.group(2)).upper()
    frac = FRAC.match(rest)
    if frac:
        return _fraction(frac.group(1), frac.group(2))
    head = rest.split("\n", 1)[0]
    number = NUMBER.search(head)
    return _number_of(number) if number else None


def _last_number(text: str) -> str | None:
    fracs = [(m.start(), _fraction(m.group(1), m.group(2))) for m in FRAC.finditer(text)]
    numbers = [(m.start(), _number_of(m)) for m in NUMBER.finditer(FRAC.sub(_blank, text))]
    found = sorted(fracs + numbers)
    return found[-1][1] if found else None


def _blank(match: re.Match) -> str:
    return " " * len(match.group(0))  # keeps the positions of what follows


def _number_of(match: re.Match) -> str | None:
    if match.group("plain") is not None:
        return _canonical(_value(match.group("plain")))
    return _fraction(match.group("num"), match.group("den"))


def _fraction(num: str, den: str) -> str | None:
    denominator = _value(den)
    if denominator == 0:
        return None
    return _canonical(_value(num) / denominator)


def _value(number: str) -> Fraction:
    return Fraction(number.replace(",", ""))


def _canonical(value: Fraction) -> str:
    """One string per value: ``12``, ``-3``, ``0.5`` (a finite decimal), ``1/3`` (any other fraction)."""
    if value.denominator == 1:
        return str(value.numerator)
    d, twos, fives = value.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    if d != 1:
        return str(value)
    places = max(twos, fives)
    scaled = abs(value.numerator) * 10 ** places // value.denominator  # exact: the denominator divides 10**places
    whole, part = divmod(scaled, 10 ** places)
    return f"{'-' if value < 0 else ''}{whole}.{part:0{places}d}"
