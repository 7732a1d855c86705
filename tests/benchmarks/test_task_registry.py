"""The task registry: names, loading into query-table fields, prompts and few-shot exemplars."""

from __future__ import annotations

import json

import pytest

from jouleroute.benchmarks import BBH_SUBTASKS, TASK_NAMES, UnknownTaskError, get_task
from jouleroute.schema import QUERY_COLUMNS


def _row(doc: dict) -> dict:
    return {**doc, "choices_json": json.dumps(doc["choices"])}


def test_canonical_task_order():
    assert TASK_NAMES == ("gsm8k", "math500", "mmlu", "arc_challenge", "arc_easy", "hellaswag", "bbh")
    assert len(BBH_SUBTASKS) == 27


def test_unknown_task_lists_the_valid_ones():
    with pytest.raises(UnknownTaskError) as info:
        get_task("gsm8kk")
    assert "gsm8kk" in str(info.value) and all(name in str(info.value) for name in TASK_NAMES)


@pytest.mark.parametrize("name", TASK_NAMES)
def test_load_gives_query_fields(name, bundled_dir):
    docs = get_task(name).load(bundled_dir)
    assert len(docs) >= 280
    for doc in docs:
        assert set(QUERY_COLUMNS) - {"split", "choices_json"} <= set(doc)
        assert doc["query_id"].startswith(f"{name}/") and doc["task"] == name and doc["gold"]
        assert doc["source_file"].startswith(bundled_dir.as_posix())
    assert len({d["query_id"] for d in docs}) == len(docs)


def test_bbh_and_mmlu_subtasks(docs_by_id):
    assert {d["subtask"] for d in docs_by_id.values() if d["task"] == "bbh"} == set(BBH_SUBTASKS)
    assert len({d["subtask"] for d in docs_by_id.values() if d["task"] == "mmlu"}) == 57
    assert {d["subtask"] for d in docs_by_id.values() if d["task"] not in ("bbh", "mmlu")} == {""}


@pytest.mark.parametrize("name", TASK_NAMES)
@pytest.mark.parametrize("style", ["direct", "cot"])
def test_fewshot_prompt_uses_k_held_out_exemplars(name, style, docs_by_id, bundled_dir):
    task = get_task(name)
    doc = next(d for d in docs_by_id.values() if d["task"] == name)
    prompt = task.fewshot_prompt(_row(doc), style, k=2, data_dir=bundled_dir)
    assert prompt.count("Question: ") == 3  # two exemplars and the query
    opener = " Let's think step by step." if style == "cot" else ""
    assert prompt.endswith(f"Question: {doc['question']}\nAnswer:{opener}")
    exemplars = task.exemplars(doc["subtask"], bundled_dir)[:2]
    query_ids = {d["query_id"] for d in docs_by_id.values()}
    assert all(ex["query_id"] not in query_ids for ex in exemplars)  # never a query as its own exemplar
    assert all(ex["subtask"] == doc["subtask"] for ex in exemplars)


def test_cot_exemplars_show_reasoning_and_direct_ones_do_not(docs_by_id, bundled_dir):
    task = get_task("gsm8k")
    row = _row(docs_by_id["gsm8k/test-0000"])
    direct = task.fewshot_prompt(row, "direct", data_dir=bundled_dir)
    cot = task.fewshot_prompt(row, "cot", data_dir=bundled_dir)
    # First GSM8K train row: Natalia's clips, 72; calculator annotations stripped.
    assert "Answer: 72\n" in direct and "48/2 = 24 clips" not in direct
    assert "48/2 = 24 clips in May" in cot and "<<" not in cot and "So the answer is 72." in cot


def test_bbh_direct_exemplars_keep_only_the_answer(docs_by_id, bundled_dir):
    row = _row(docs_by_id["bbh/navigate-0000"])
    prompt = get_task("bbh").fewshot_prompt(row, "direct", data_dir=bundled_dir)
    assert prompt.startswith("Given a series of navigation instructions")
    assert "Answer: No\n" in prompt and "facing the positive y-axis" not in prompt


def test_mmlu_exemplars_come_from_the_same_subject(docs_by_id, bundled_dir):
    row = _row(docs_by_id["mmlu/test-abstract_algebra-0000"])
    prompt = get_task("mmlu").fewshot_prompt(row, "direct", data_dir=bundled_dir)
    assert prompt.startswith("The following are multiple choice questions (with answers) about abstract algebra.")


def test_too_many_exemplars_is_an_error(docs_by_id, bundled_dir):
    row = _row(docs_by_id["bbh/navigate-0000"])
    with pytest.raises(ValueError, match="only 3 exemplars"):
        get_task("bbh").fewshot_prompt(row, "direct", k=4, data_dir=bundled_dir)


@pytest.mark.parametrize("style", ["direct", "cot"])
def test_chat_messages_ask_for_the_answer_format(style, docs_by_id):
    row = _row(docs_by_id["bbh/web_of_lies-0000"])
    messages = get_task("bbh").chat_messages(row, style)
    assert [m["role"] for m in messages] == ["user"]
    assert messages[0]["content"].startswith(row["question"])
    assert '"Answer: Yes or No"' in messages[0]["content"]
    assert ("step by step" in messages[0]["content"]) is (style == "cot")


def test_unknown_answer_style_is_rejected(docs_by_id):
    with pytest.raises(ValueError, match="answer_style"):
        get_task("gsm8k").chat_messages(_row(docs_by_id["gsm8k/test-0000"]), "verbose")


def test_stop_sequences():
    task = get_task("gsm8k")
    assert "\nQuestion:" in task.stop_sequences("cot") and "\n\n" not in task.stop_sequences("cot")
    assert "\n\n" in task.stop_sequences("direct")


def test_grade_row_reads_choices_json(docs_by_id):
    row = _row(docs_by_id["arc_challenge/Mercury_7175875"])
    assert get_task("arc_challenge").grade_row("Planetary days will become shorter.", row).correct
