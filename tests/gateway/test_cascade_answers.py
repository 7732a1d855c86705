"""The cascade's parts without HTTP: the task-free extractor, agreement, a stage's decision, the chain file and
the config keys."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from jouleroute.benchmarks.task_free import answers_agree, extract_answer
from jouleroute.gateway.cascade import Call, decide, describe, load_chain
from jouleroute.gateway.config import GatewayRouterConfig
from jouleroute.gateway.upstreams import Answer


@pytest.mark.parametrize("text, expected", [
    ("12", "12"), ("12.0", "12"), ("1,200", "1200"), ("$1,200.00", "1200"), ("-3", "-3"), ("50%", "50"),
    ("She has 3 apples and 4 pears, 7 in all.", "7"), ("3 + 4 = 7\n#### 7", "7"),
    ("The answer is 12. Check: 6 + 6 = 12", "12"), ("Final answer: -0.50", "-0.5"),
    ("\\boxed{12}", "12"), ("so \\boxed{\\frac{1}{2}} holds", "0.5"), ("\\boxed{x^2 + 1}", "x^2+1"),
    ("\\boxed{\\text{(C)}}", "C"), ("(B)", "B"), ("B", "B"), ("B.", "B"), ("b", "B"),
    ("The answer is (B) because", "B"), ("answer is D", "D"), ("Answer: C) 42", "C"),
    ("1/2", "0.5"), ("1/3", "1/3"), ("3.14.", "3.14"),
])
def test_the_extractor_reads_numbers_boxes_and_options(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", ["", "   ", None, "I do not know.", "The answer is Bob.", "x = 1/0"])
def test_nothing_to_read_is_none(text):
    assert extract_answer(text) is None


@pytest.mark.parametrize("a, b, agree", [
    ("12", "12.0", True), ("The answer is 1,200", "#### 1200", True), ("(B)", "B", True),
    ("\\boxed{B}", "The answer is (B).", True), ("0.5", "1/2", True),  # task-free: numbers compare by value
    ("\\boxed{\\frac{1}{2}}", "0.5", True), ("12", "13", False), ("B", "C", False), ("2", "B", False),
    ("1/2", "2", False),  # a fraction is never read as its denominator
    ("", "", False), ("", "12", False), ("no idea", "no idea", False),  # nothing extracted never agrees
])
def test_agreement(a, b, agree):
    assert answers_agree(extract_answer(a), extract_answer(b)) is agree


def call(candidate: str, text: str | None, tokens: int = 5, stage: int = 1) -> Call:
    """A call that answered ``text`` with ``tokens`` completion tokens, or failed (``text`` None)."""
    if text is None:
        return Call(stage, candidate, error=f"upstream '{candidate}': unreachable", status=502)
    return Call(stage, candidate, Answer({}, 3, tokens, 1.0, "estimated"), text, extract_answer(text))


def test_a_stage_of_several_accepts_when_two_agree():
    d = decide([call("a", "13"), call("b", "12"), call("c", "12.0")], last=False, max_output_tokens=None)
    assert d.accepted and d.chosen.candidate == "b" and d.reason == "agreed"
    assert decide([call("a", "12"), call("b", "13")], False, None).reason == "disagree"
    assert decide([call("a", "12"), call("b", None)], False, None).reason == "too_few_answers"
    assert decide([call("a", "nothing"), call("b", "")], False, None).reason == "no_answer"


def test_a_stage_of_one_accepts_a_short_extracted_answer():
    assert decide([call("a", "#### 7", tokens=9)], False, 10).accepted
    assert decide([call("a", "#### 7", tokens=10)], False, 10).reason == "too_long"  # fewer than the bound
    assert decide([call("a", "no idea")], False, 10).reason == "no_answer"
    assert decide([call("a", None)], False, None).reason == "no_answer"


def test_the_last_stage_always_answers_when_anything_came_back():
    d = decide([call("c", "a long answer of 7", tokens=500)], last=True, max_output_tokens=10)
    assert d.accepted and d.chosen.candidate == "c" and d.reason == "last_stage"
    d = decide([call("c", None), call("d", "no number here"), call("e", "")], last=True, max_output_tokens=None)
    assert d.accepted and d.chosen.candidate == "d"  # no extracted answer: the first with text
    d = decide([call("c", "12"), call("d", "13"), call("e", "13")], last=True, max_output_tokens=None)
    assert d.chosen.candidate == "d" and d.reason == "agreed"
    assert not decide([call("c", None)], last=True, max_output_tokens=None).accepted


def test_the_chain_file_is_the_cascade_librarys(tmp_path):
    path = tmp_path / "chain.json"
    path.write_text('{"stages": [["a", "b"], ["c"]], "max_output_tokens": 256, "chosen_by": "above_best",'
                    ' "selection": {"accuracy": 0.8}}')
    artifact = load_chain(path)
    assert artifact.chain.candidates == ("a", "b", "c") and artifact.chain.max_output_tokens == 256
    assert describe(artifact.chain) == "stage1=a,b;stage2=c"
    for bad, says in (('{"stages": [["a"], ["a"]], "max_output_tokens": null, "chosen_by": "x", "selection": {}}',
                       "appears twice"),
                      ('{"stages": [[], ["c"]], "max_output_tokens": null, "chosen_by": "x", "selection": {}}',
                       "no empty stage"),
                      ('{"stages": [["a"]], "max_tokens": 3, "chosen_by": "x", "selection": {}}', "exactly the keys")):
        path.write_text(bad)
        with pytest.raises(ValueError, match=says) as error:
            load_chain(path)
        assert str(path) in str(error.value)
    with pytest.raises(FileNotFoundError, match="no chain file"):
        load_chain(tmp_path / "missing.json")


def test_the_config_keys():
    assert GatewayRouterConfig(kind="cascade", chain="artifacts/chain.json").chain == "artifacts/chain.json"
    with pytest.raises(ValidationError, match="router.chain"):
        GatewayRouterConfig(kind="cascade")
    with pytest.raises(ValidationError, match="router.chain"):
        GatewayRouterConfig(kind="knn", chain="chain.json")
    with pytest.raises(ValidationError, match="extra"):
        GatewayRouterConfig(kind="cascade", chain="c.json", chains="typo.json")
