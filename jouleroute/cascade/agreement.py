"""When two candidates' answers agree: each task's own normalisation and grader equivalence, never raw strings.

A cascade accepts a stage when two of its members give the same answer, so "the same" must mean what the task's
grader means by equal to the gold answer:

- ``number`` (GSM8K): the number the GSM8K grader reads (``extract_number``), compared as decimals: ``12`` and
  ``12.0`` and ``$12`` agree;
- ``math`` (MATH-500, ZeroEval's MATH level 5): the answer math-verify parses (``extract_math``, as the MATH
  grader reads an output), equal when math-verify verifies either one against the other: ``1/2`` and ``0.5``
  and ``\\frac{1}{2}`` agree. Plain decimals take a fast path (exact decimal equality) since math-verify is slow;
- ``choice`` (MMLU, ARC, HellaSwag, Winogrande): the option letter (``extract_letter``): ``(B)``, ``B`` and
  ``B.`` agree;
- ``bbh``: by the answer's shape, as BBH's grader reads each target kind: an option ``(A)``, a number, a
  bracket sequence (spaces ignored), else words (commas, case, trailing full stop ignored), so labels such as
  ``True``/``true`` agree.

A task with no comparable answer (code, free text: ``mbpp``, CRUXEval) has kind ``None`` and never agrees; so
does an empty or missing answer, on any task. Tasks outside the benchmark registry that imported pools carry
are named in ``EXTRA_TASK_KINDS``; any other unknown task never agrees (logged once).

``agreement_bits`` turns a [queries, candidates] answer matrix into [queries, candidates, candidates] agreement
bits, once: exact-key kinds group each query's answers into classes by key; ``math`` compares each query's
distinct answer strings pairwise (cached across queries). The diagonal says whether a candidate gave an answer
that could agree with anything, i.e. it has a key.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from decimal import Decimal
from typing import Hashable, Literal, Mapping, Sequence

import numpy as np
from math_verify import verify

from jouleroute.benchmarks.extract import extract_letter, extract_number, parse_number
from jouleroute.benchmarks.grading import extract_math
from jouleroute.benchmarks.registry import TASKS

logger = logging.getLogger(__name__)

AgreementKind = Literal["number", "math", "choice", "bbh"]

# Tasks of imported pools that the benchmark registry does not declare: the kind their answers are compared by.
EXTRA_TASK_KINDS: Mapping[str, AgreementKind | None] = {
    "math_l5": "math",  # ZeroEval's MATH level 5, graded with the MATH grader (replay/pools/zeroeval_math.py)
    "winogrande": "choice",  # RouterBench: "A" or "B"
    "arc": "choice",
    "mbpp": None,  # code: no comparable answer
    "cruxeval_input": None,  # CRUXEval: pass@1 of code reasoning, no answer recorded
    "cruxeval_output": None,
}

_PLAIN_DECIMAL = re.compile(r"-?\d+(?:\.\d+)?")
_OPTION = re.compile(r"\(?([A-Z])\)?")
_DYCK_CHARS = set("()[]{}<> ")


@functools.cache
def agreement_kind(task: str) -> AgreementKind | None:
    """How answers of ``task`` are compared (module doc); ``None``: they never agree."""
    if task in TASKS:
        return TASKS[task].answer_kind
    if task in EXTRA_TASK_KINDS:
        return EXTRA_TASK_KINDS[task]
    logger.warning("task %r: no answer normalisation known (neither in the benchmark registry nor in "
                   "cascade.agreement.EXTRA_TASK_KINDS); its answers never agree", task)
    return None


def _blank(answer: object) -> bool:
    return answer is None or not isinstance(answer, str) or not answer.strip()


def _number_key(answer: str) -> Decimal | None:
    token = extract_number(answer)
    return parse_number(token) if token is not None else None


def _bbh_key(answer: str) -> tuple[str, Hashable] | None:
    """BBH's target kinds, read from the answer's own shape (the grader reads them from the gold's)."""
    text = answer.strip()
    option = _OPTION.fullmatch(text)
    if option:
        return "option", option.group(1)
    number = parse_number(text) if _PLAIN_DECIMAL.fullmatch(text.replace(",", "")) else None
    if number is not None:
        return "number", number
    if set(text) <= _DYCK_CHARS:
        return "dyck", text.replace(" ", "")
    words = " ".join(text.replace(",", " ").strip().rstrip(".").split()).casefold()  # grading's BBH text rule
    return ("text", words) if words else None


def answer_key(kind: AgreementKind | None, answer: object) -> Hashable | None:
    """The key two answers of an exact-key kind agree on when equal; ``None``: no answer to compare. For ``math``,
    a plain decimal's value, else the stripped text (grouping only: ``math_equal`` decides)."""
    if kind is None or _blank(answer):
        return None
    text = str(answer).strip()
    if kind == "number":
        return _number_key(text)
    if kind == "choice":
        return extract_letter(text)
    if kind == "bbh":
        return _bbh_key(text)
    return parse_number(text) if _PLAIN_DECIMAL.fullmatch(text) else text


def _verify_timeout() -> int | None:
    # as the MATH grader: math-verify's timeout uses signal.alarm, which only works in the main thread
    return 5 if threading.current_thread() is threading.main_thread() else None


@functools.lru_cache(maxsize=65536)
def _math_parsed(text: str) -> tuple:
    return tuple(extract_math(text))


@functools.lru_cache(maxsize=262144)
def _math_equal_sorted(a: str, b: str) -> bool:
    pa, pb = _math_parsed(a), _math_parsed(b)
    if not pa or not pb:
        return False
    timeout = _verify_timeout()
    try:
        return bool(verify(list(pa), list(pb), timeout_seconds=timeout)
                    or verify(list(pb), list(pa), timeout_seconds=timeout))
    except Exception as exc:  # noqa: BLE001 - a comparison sympy cannot do is "not equal", as in the grader
        logger.debug("math-verify could not compare %r with %r: %s", a[:80], b[:80], exc)
        return False


def math_equal(a: str, b: str) -> bool:
    """math-verify equivalence of two answers, symmetric (either direction verifies); plain decimals exactly."""
    ka, kb = answer_key("math", a), answer_key("math", b)
    if ka is None or kb is None:
        return False
    if isinstance(ka, Decimal) and isinstance(kb, Decimal):
        return ka == kb
    a, b = a.strip(), b.strip()
    return a == b and bool(_math_parsed(a)) or _math_equal_sorted(*sorted((a, b)))


def has_answer(task: str, answer: object) -> bool:
    """Whether ``answer`` could agree with anything on ``task``: a key, and for math a parse."""
    kind = agreement_kind(task)
    key = answer_key(kind, answer)
    if key is None:
        return False
    return isinstance(key, Decimal) or kind != "math" or bool(_math_parsed(str(answer).strip()))


def answers_agree(task: str, a: object, b: object) -> bool:
    """Whether two answers to one query of ``task`` are the same answer (module doc). Empty never agrees."""
    kind = agreement_kind(task)
    if kind == "math":
        return not _blank(a) and not _blank(b) and math_equal(str(a), str(b))
    ka, kb = answer_key(kind, a), answer_key(kind, b)
    return ka is not None and ka == kb


def _query_bits(task: str, answers: Sequence[object]) -> np.ndarray:
    """[K, K] agreement of one query's answers; the diagonal: has an answer that can agree."""
    k = len(answers)
    kind = agreement_kind(task)
    bits = np.zeros((k, k), dtype=bool)
    if kind is None:
        return bits
    if kind != "math":
        keys = [answer_key(kind, a) for a in answers]
        for i, key in enumerate(keys):
            if key is not None:
                bits[i] = [key == other for other in keys]
        return bits
    texts = [None if _blank(a) else str(a).strip() for a in answers]
    distinct = sorted({t for t in texts if t is not None and has_answer(task, t)})
    same = {(x, y): x == y or math_equal(x, y) for i, x in enumerate(distinct) for y in distinct[i:]}
    for i, x in enumerate(texts):
        for j, y in enumerate(texts):
            if x is not None and y is not None and x in distinct and y in distinct:
                bits[i, j] = same[(x, y) if x <= y else (y, x)]
    return bits


def agreement_bits(tasks: Sequence[str], answers: np.ndarray) -> np.ndarray:
    """[Q, K, K] bool: whether candidates i and j answered query q the same (module doc), from a [Q, K] answer
    matrix (str or None) and each query's task. Symmetric; the diagonal is "has an answer"."""
    answers = np.asarray(answers, dtype=object)
    if answers.ndim != 2 or answers.shape[0] != len(tasks):
        raise ValueError(f"agreement_bits: answers must be [queries, candidates] with one task per query; got "
                         f"{answers.shape} for {len(tasks)} tasks")
    return np.stack([_query_bits(t, row) for t, row in zip(tasks, answers)]) if len(tasks) else \
        np.zeros((0, answers.shape[1], answers.shape[1]), dtype=bool)
