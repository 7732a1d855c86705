"""Each rule of the policy layer exists once (issue 47): the best-single rule, the target type, meeting a target,
and the paired comparison's verdict words. Read from the source, never run (instant); a second copy fails here, as
a second table of router families or pools fails tests/test_architecture.py."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCES = [p for folder in ("jouleroute", "scripts", "experiments", "benchmarks")
           for p in sorted((REPO / folder).rglob("*.py"))]
POLICY = REPO / "jouleroute/policy"
VERDICT_WORDS = {"non-inferior", "inferior", "inconclusive"}
RULE_NAMES = {"choose_lambda", "meet_target", "pick_singles", "best_single", "best_column", "single_for_target",
              "accuracy_verdict", "energy_verdict", "compare"}


def _outside(path: Path, *own: str) -> bool:
    return path.is_relative_to(POLICY) is False and path not in {REPO / o for o in own}


def _trees():
    for path in SOURCES:
        yield path, ast.parse(path.read_text(), str(path))


def test_the_best_single_rule_is_written_once():
    """A sort key that ranks by a negated figure first (the most accurate first) lives in best_single.py or the
    policy layer: everything else asks ``best_single``."""
    found = []
    for path, tree in _trees():
        if not _outside(path, "jouleroute/best_single.py"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "key" and isinstance(node.value, ast.Lambda):
                body = node.value.body
                if isinstance(body, ast.Tuple) and body.elts and isinstance(body.elts[0], ast.UnaryOp) and \
                        isinstance(body.elts[0].op, ast.USub):
                    found.append(f"{path.relative_to(REPO)}:{node.value.lineno}")
    assert not found, "a best-single-style ranking outside jouleroute/best_single.py and policy/:\n" + "\n".join(found)


def test_one_target_type():
    """No class outside policy/target.py declares a target's fields."""
    found = []
    for path, tree in _trees():
        if not _outside(path, "jouleroute/policy/target.py"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and
                          isinstance(s.target, ast.Name)}
                if fields & {"energy_share", "accuracy_floor", "iso_accuracy", "above_best"}:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.name}")
    assert not found, "a second target type:\n" + "\n".join(found)


def test_meeting_a_target_and_the_verdicts_are_written_once():
    """Outside the policy layer no code compares with a target's value, defines a rule of the layer under its
    name, or spells a verdict word other than to read one (a comparison of a verdict with a word is reading)."""
    found = []
    for path, tree in _trees():
        if not _outside(path, "jouleroute/best_single.py"):
            continue
        reading = {id(c) for n in ast.walk(tree) if isinstance(n, ast.Compare) for c in [n.left, *n.comparators]}
        reading |= {id(k) for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys if k is not None}
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Attribute) and s.attr == "value" and isinstance(s.value, ast.Name) and
                       s.value.id == "target" for s in sides):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: compares with target.value")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in RULE_NAMES:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: defines {node.name}")
            if isinstance(node, ast.Constant) and node.value in VERDICT_WORDS and id(node) not in reading:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: spells the verdict {node.value!r}")
    assert not found, "a rule of jouleroute/policy written again:\n" + "\n".join(found)


def test_the_checks_above_catch_a_copy(tmp_path):
    """The checks are not vacuous: the old copies they replaced are caught."""
    copy = ast.parse("best = min(order, key=lambda c: (-acc[c], joules[c], c))\n"
                     "class RouterTarget:\n    energy_share: float | None = None\n"
                     "ok = share <= target.value\nword = 'inconclusive'\n")
    keys = [n for n in ast.walk(copy) if isinstance(n, ast.keyword) and n.arg == "key"]
    classes = [n for n in ast.walk(copy) if isinstance(n, ast.ClassDef)]
    compares = [n for n in ast.walk(copy) if isinstance(n, ast.Compare) and isinstance(n.comparators[0], ast.Attribute)]
    words = [n for n in ast.walk(copy) if isinstance(n, ast.Constant) and n.value in VERDICT_WORDS]
    assert keys and classes and compares and words
