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
# every word of policy/compare.py's verdicts, and the words of the copies it replaced: two of them spelt together
# make a verdict-word set
ALL_VERDICT_WORDS = VERDICT_WORDS | {"above", "untested", "cheaper", "dearer", "tie", "win", "loss", "better", "worse"}
RULE_NAMES = {"choose_lambda", "meet_target", "pick_singles", "best_single", "best_column", "single_for_target",
              "accuracy_verdict", "energy_verdict", "difference_verdict", "verdict", "compare", "share_interval",
              "reaches_floor", "iso_accuracy_point"}
COMPARE = REPO / "jouleroute/policy/compare.py"
RESAMPLING = {COMPARE, REPO / "jouleroute/stats.py"}
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


def _reading(tree: ast.AST) -> set[int]:
    """The constants that read a word rather than write one: a side of a comparison, its tuple's items, a dict key."""
    reading = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            for side in [n.left, *n.comparators]:
                reading.add(id(side))
                if isinstance(side, (ast.Tuple, ast.List, ast.Set)):
                    reading |= {id(e) for e in side.elts}
        if isinstance(n, ast.Dict):
            reading |= {id(k) for k in n.keys if k is not None}
    return reading


def rule_copies(tree: ast.AST) -> list[str]:
    """Comparisons with a target's value, the layer's rules defined again, verdict words spelt other than to read
    one (``_reading``)."""
    reading = _reading(tree)
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


def verdict_word_sets(tree: ast.AST) -> list[str]:
    """Functions and module-level statements that write two verdict words or more (``ALL_VERDICT_WORDS``): a set of
    verdict words of their own, as evaluation/bootstrap.py's win/loss/tie was."""
    reading = _reading(tree)
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))]
    scopes += [s for s in getattr(tree, "body", []) if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                          ast.ClassDef))]
    found = []
    for scope in scopes:
        words = {n.value for n in ast.walk(scope) if isinstance(n, ast.Constant) and n.value in ALL_VERDICT_WORDS
                 and id(n) not in reading}
        if len(words) > 1:
            found.append(f"{scope.lineno}: writes {sorted(words)}")
    return found


def hand_rolled_intervals(tree: ast.AST) -> list[int]:
    """Lines of a percentile interval over means or sums of resampled rows written out (``x[index].mean(axis=1)``):
    a bootstrap that policy/compare.py (or stats.paired_mean_ci) already draws, as cascade_choice's pooled
    out-of-fold figures did."""
    return [call.lineno for call in ast.walk(tree) if isinstance(call, ast.Call) and (
        getattr(call.func, "id", None) or getattr(call.func, "attr", None)) == "percentile_interval" and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("mean", "sum") and
        isinstance(n.func.value, ast.Subscript) for arg in call.args for n in ast.walk(arg))]


def _names(node: ast.AST) -> set[str]:
    """Every identifier and string constant in ``node``, lower case."""
    return {str(getattr(n, "id", None) or getattr(n, "attr", None) or n.value).lower() for n in ast.walk(node)
            if isinstance(n, (ast.Name, ast.Attribute)) or (isinstance(n, ast.Constant) and isinstance(n.value, str))}


def iso_floor_copies(tree: ast.AST) -> list[int]:
    """Lines comparing with an accuracy minus a tolerance (``acc >= best_acc - tolerance``): the iso-accuracy floor,
    which policy/meet.py's ``reaches_floor`` and ``iso_accuracy_point`` test (the val contest's share, the test
    split's iso-accuracy figures, savings captured and the study page's stretch target each wrote it)."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare) and any(
        isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Sub) and any(
            "tolerance" in n or "acc_points" in n for n in _names(sub.right)) and any(
            "acc" in n for n in _names(sub.left)) for side in [node.left, *node.comparators] for sub in ast.walk(side))]


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


def test_one_set_of_verdict_words():
    found = [f"{path.relative_to(REPO)}:{what}" for path, tree in _trees()
             if path != COMPARE for what in verdict_word_sets(tree)]
    assert not found, "verdict words outside jouleroute/policy/compare.py:\n" + "\n".join(found)


def test_the_paired_bootstrap_is_drawn_in_one_place():
    found = [f"{path.relative_to(REPO)}:{line}" for path, tree in _trees() if path not in RESAMPLING
             for line in hand_rolled_intervals(tree)]
    assert not found, ("a bootstrap interval written out: call policy/compare.py (compare, accuracy_intervals, "
                       "share_interval) or stats.paired_mean_ci:\n" + "\n".join(found))


def test_the_iso_accuracy_floor_is_written_once():
    found = [f"{path.relative_to(REPO)}:{line}" for path, tree in _trees() if path != REPO / "jouleroute/policy/meet.py"
             for line in iso_floor_copies(tree)]
    assert not found, ("an accuracy compared with the best's minus a tolerance: call policy.meet.reaches_floor or "
                       "iso_accuracy_point:\n" + "\n".join(found))


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
    assert verdict_word_sets(ast.parse('TIE, WIN, LOSS = "tie", "win", "loss"\n'))  # evaluation/bootstrap.py's
    assert verdict_word_sets(ast.parse("def v(lo, hi):\n    return 'tie' if lo <= 0 <= hi else 'loss'"))
    assert not verdict_word_sets(ast.parse("say = {'win': 'wins', 'loss': 'loses'}[row['verdict']]\n"))
    # the experiments' own words, before they called compare.difference_verdict
    assert verdict_word_sets(ast.parse('label = "tie" if low <= 0 <= high else ("better" if low > 0 else "worse")'))
    assert verdict_word_sets(ast.parse('v = {"above": "win", "inferior": "loss", "inconclusive": "tie"}.get(r, r)'))
    pooled = ("ci = percentile_interval(diff[index].mean(axis=1), confidence)\n"  # cascade_choice's pooled figures
              "share = percentile_interval(e[index].sum(axis=1) / ref[index].sum(axis=1), confidence)\n")
    assert len(hand_rolled_intervals(ast.parse(pooled))) == 2
    assert not hand_rolled_intervals(ast.parse("ci = percentile_interval(diff[1:], confidence)\n"))
    floors = ("ok = [j for acc, j in points if acc >= reference['accuracy'] - tolerance - 1e-12]\n"  # val_contest
              "qualifies = acc >= (best_acc - tolerance - _EPS)[:, None]\n"  # iso_accuracy
              "if acc < best.accuracy - tolerance - 1e-12:\n    pass\n"  # frontier's savings captured
              "ok = [n for n, s in lm.items() if s['accuracy'] >= best['accuracy'] - TARGET_ACC_POINTS]\n")
    assert len(iso_floor_copies(ast.parse(floors))) == 4
    assert not iso_floor_copies(ast.parse("ok = correct >= top - TIE_TOLERANCE\n"))  # a tie, not a floor
