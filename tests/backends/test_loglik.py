"""Log-likelihood answering: the shared-KV scorer equals a direct full-sequence computation, the
choice is the best length-normalised score, and multiple-choice rows are never invalid."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from jouleroute.backends import LoglikRequest, answer_requests
from jouleroute.backends.base import GenRequest, best_normalized
from jouleroute.backends.loglik import batch_logliks, split_tokens
from jouleroute.benchmarks import get_task

REQUEST = LoglikRequest("Question: which colour is the sky?\nAnswer:",
                        (" blue", " green with a long tail of words", " red"), ("A", "B", "C"))


def direct_logliks(backend, request: LoglikRequest) -> list[float]:
    """Each continuation scored on its own, full sequence, no cache: the textbook computation."""
    totals = []
    for continuation in request.continuations:
        context_ids, continuation_ids = split_tokens(backend.tokenizer, request.context, continuation)
        ids = torch.tensor([context_ids + continuation_ids])
        with torch.inference_mode():
            logprobs = torch.log_softmax(backend.model(input_ids=ids).logits[0].float(), dim=-1)
        totals.append(sum(float(logprobs[len(context_ids) + j - 1, tok]) for j, tok in enumerate(continuation_ids)))
    return totals


OTHER = LoglikRequest("A much longer context, so that the batch needs left padding: the capital of France is",
                      (" Paris", " Rome", " a city on the river Seine", " x"), ("A", "B", "C", "D"))


def test_shared_context_scores_equal_direct_computation(tiny_backend):
    """Batched (left-padded contexts, shared KV cache, head on real positions only) == one by one, uncached."""
    scored = batch_logliks(tiny_backend.model, tiny_backend.tokenizer, [REQUEST, OTHER], "cpu")
    for request, (shared, n_tokens) in zip([REQUEST, OTHER], scored):
        assert shared == pytest.approx(direct_logliks(tiny_backend, request), abs=1e-4)
        assert all(math.isfinite(x) and x < 0 for x in shared)
        context_len = len(tiny_backend.tokenizer(request.context)["input_ids"])
        assert n_tokens > context_len + len(request.continuations)  # the context once, plus every continuation


def test_result_is_the_best_normalised_choice(tiny_backend):
    [result] = tiny_backend.loglik([REQUEST])
    direct = direct_logliks(tiny_backend, REQUEST)
    per_byte = [ll / len(c.encode()) for ll, c in zip(direct, REQUEST.continuations)]
    assert result.text == f"Answer: {REQUEST.labels[per_byte.index(max(per_byte))]}"
    assert result.output_tokens == 0 and result.finish_reason == "stop"


def test_best_normalized_divides_by_bytes_and_breaks_ties_first():
    # Raw sums favour the short choice; per byte, the long one wins.
    assert best_normalized([-2.0, -6.0], (" ab", " abcdefghijk")) == 1
    assert best_normalized([-1.0, -1.0], (" x", " y")) == 0


def test_mixed_batch_keeps_request_order(tiny_backend):
    requests = [GenRequest(prompt="Hello", max_new_tokens=2), REQUEST, GenRequest(prompt="Bye", max_new_tokens=2)]
    results = answer_requests(tiny_backend, requests)
    assert results[1].text.startswith("Answer: ") and results[1].output_tokens == 0
    assert results[0].output_tokens > 0 and results[2].output_tokens > 0


@pytest.mark.parametrize("task_name", ["mmlu", "arc_easy", "hellaswag"])
def test_multiple_choice_rows_are_never_invalid(tiny_backend, task_name):
    """Whatever a random model prefers, the answer is one of the options, so it grades valid."""
    task = get_task(task_name)
    data_dir = Path("data/external/benchmarks")
    docs = task.load(data_dir)[:4]
    rows = [{**d, "choices_json": json.dumps(d["choices"])} for d in docs]
    requests = [task.loglik_request(row, 0, data_dir=data_dir) for row in rows]
    assert all(r is not None and len(r.continuations) == len(row["choices"]) for r, row in zip(requests, rows))
    for row, result in zip(rows, tiny_backend.loglik(requests)):
        grade = task.grade_row(result.text, row)
        assert not grade.invalid


def test_free_form_rows_keep_generation():
    task = get_task("gsm8k")
    row = {"question": "1+1?", "choices_json": "[]", "subtask": "", "gold": "2"}
    assert task.loglik_request(row, 0) is None


def test_bbh_label_subtask_scores_the_label_pair():
    task = get_task("bbh")
    row = {"question": "not True is", "choices_json": "[]", "subtask": "boolean_expressions", "gold": "False"}
    request = task.loglik_request(row, 1)
    assert request.continuations == (" True", " False") and request.labels == ("True", "False")
    assert request.context.count("Question:") == 2  # one solved exemplar, then the query


def test_params_refuse_loglik_on_a_backend_that_cannot_score():
    import yaml

    from jouleroute.config import Params

    raw = yaml.safe_load(Path("params.yaml").read_text())
    assert any(c["answer_style"] == "loglik" for c in raw["pool"])
    Params.model_validate(raw)  # the shipped default (transformers) is fine
    raw["backend"] = {"kind": "openai", "base_url": "http://127.0.0.1:1/v1"}
    with pytest.raises(ValueError, match="answer_style: 'loglik' needs backend.kind 'transformers'"):
        Params.model_validate(raw)
