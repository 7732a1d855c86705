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
TARGET_FIELDS = {"energy_share", "accuracy_floor", "iso_accuracy", "above_best"}


def _outside(path: Path, *own: str) -> bool:
    return path.is_relative_to(POLICY) is False and path not in {REPO / o for o in own}


def _trees():
    for path in SOURCES:
        yield path, ast.parse(path.read_text(), str(path))


def best_single_copies(tree: ast.AST) -> list[int]:
    """Lines of a sort key ranking by a negated figure first, or by (figure, negated figure) under max: the
    most accurate first, ties to the cheaper."""
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        under_max = isinstance(call.func, ast.Name) and call.func.id == "max"
        for node in call.keywords:
            body = node.value.body if node.arg == "key" and isinstance(node.value, ast.Lambda) else None
            if isinstance(body, ast.Tuple) and len(body.elts) > 1:
                negated = [isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub) and not _an_index(e.operand)
                           for e in body.elts]
                if (negated[0] and not under_max) or (under_max and not negated[0] and negated[1]):
                    found.append(node.value.lineno)
    return found


def _an_index(node: ast.AST) -> bool:
    """-i or -names.index(x): a tie-break by position, not by a figure."""
    return isinstance(node, ast.Name) or (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                                          and node.func.attr == "index")


def target_types(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and TARGET_FIELDS & {
        s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}]


def rule_copies(tree: ast.AST) -> list[str]:
    """Comparisons with a target's value, the layer's rules defined again, verdict words spelt other than to read
    one (a side of a comparison, its tuple's items, or a dict key)."""
    reading = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            for side in [n.left, *n.comparators]:
                reading.add(id(side))
                if isinstance(side, (ast.Tuple, ast.List, ast.Set)):
                    reading |= {id(e) for e in side.elts}
        if isinstance(n, ast.Dict):
            reading |= {id(k) for k in n.keys if k is not None}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                isinstance(s, ast.Attribute) and s.attr == "value" and isinstance(s.value, ast.Name) and
                s.value.id == "target" for s in [node.left, *node.comparators]):
            found.append(f"{node.lineno}: compares with target.value")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in RULE_NAMES:
            found.append(f"{node.lineno}: defines {node.name}")
        if isinstance(node, ast.Constant) and node.value in VERDICT_WORDS and id(node) not in reading:
            found.append(f"{node.lineno}: spells the verdict {node.value!r}")
    return found


def test_the_best_single_rule_is_written_once():
    found = [f"{path.relative_to(REPO)}:{line}" for path, tree in _trees()
             if _outside(path, "jouleroute/best_single.py") for line in best_single_copies(tree)]
    assert not found, "a best-single-style ranking outside jouleroute/best_single.py and policy/:\n" + "\n".join(found)


def test_one_target_type():
    found = [f"{path.relative_to(REPO)}:{line}" for path, tree in _trees()
             if _outside(path, "jouleroute/policy/target.py") for line in target_types(tree)]
    assert not found, "a second target type:\n" + "\n".join(found)


def test_meeting_a_target_and_the_verdicts_are_written_once():
    found = [f"{path.relative_to(REPO)}:{what}" for path, tree in _trees()
             if _outside(path, "jouleroute/best_single.py") for what in rule_copies(tree)]
    assert not found, "a rule of jouleroute/policy written again:\n" + "\n".join(found)


def test_the_checks_catch_the_copies_they_replaced():
    """Each detector flags the old copies (so none of the checks above passes by finding nothing to look at), and
    reading a verdict is not writing one."""
    assert best_single_copies(ast.parse("best = min(order, key=lambda c: (-acc[c], joules[c], c))"))
    assert best_single_copies(ast.parse("best = max(order, key=lambda c: (acc[c], -joules[c]))"))
    assert not best_single_copies(ast.parse("cheap = min(order, key=lambda c: (joules[c], acc[c]))"))
    assert not best_single_copies(ast.parse("top = max(range(n), key=lambda i: (score[i], -i))"))
    assert best_single_copies(ast.parse(  # the LM router's label fallback, before it called best_single
        "pick = max(candidates, key=lambda c: (task_acc.get(c, 0.0), -mean_energy[c], -candidates.index(c)))"))
    assert target_types(ast.parse("class RouterTarget:\n    energy_share: float | None = None\n"))
    copies = rule_copies(ast.parse("ok = share <= target.value\nword = 'inconclusive'\n"
                                   "def best_single(a, j):\n    return 0\n"))
    assert len(copies) == 3, copies
    assert not rule_copies(ast.parse("ok = verdict in ('above', 'non-inferior')\nwords = {'inferior': 'loss'}\n"))
