"""Log-likelihood answering for an in-process causal LM: each context is read once, its choices share it.

A batch of requests runs in two forward passes:

1. the contexts, left-padded into one batch with the KV cache on, keeping only each context's
   last position's logits (they score every continuation's first token);
2. every (request, choice) continuation, right-padded into one batch on top of its own
   context's KV cache rows (``Cache.batch_select_indices``), through the decoder only; the
   LM head then runs on the real continuation positions alone, never on padding.

So a 4-choice question costs one context pass plus its short continuations, not four context
passes, and on a 262k-vocabulary model (Gemma) the LM head only sees positions that count.
Positions are explicit (``attention_mask.cumsum - 1``), so padding changes nothing.
"""

from __future__ import annotations

from jouleroute.backends.base import LoglikRequest


def split_tokens(tokenizer, context: str, continuation: str,
                 context_ids: list[int] | None = None) -> tuple[list[int], list[int]]:
    """Context ids and continuation ids, split the way the whole text tokenizes (lm-eval's rule).

    Tokenizing ``context + continuation`` together and cutting at the context's length keeps
    merges across the boundary honest; if the whole text does not start with the context's
    tokens, the continuation is tokenized on its own. ``context_ids``: the context already tokenized
    (one tokenization per request, not per option).
    """
    if context_ids is None:
        context_ids = tokenizer(context)["input_ids"]
    whole = tokenizer(context + continuation)["input_ids"]
    if whole[: len(context_ids)] == context_ids and len(whole) > len(context_ids):
        return context_ids, whole[len(context_ids):]
    return context_ids, tokenizer(continuation, add_special_tokens=False)["input_ids"]


def batch_logliks(model, tokenizer, requests: list[LoglikRequest], device: str) -> list[tuple[list[float], int]]:
    """Per request: the summed log-probability of each continuation, and the tokens processed."""
    import torch

    contexts = [tokenizer(r.context)["input_ids"] for r in requests]
    choices = [[split_tokens(tokenizer, r.context, c, ids)[1] for c in r.continuations]
               for r, ids in zip(requests, contexts)]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    with torch.inference_mode():
        first, cache, context_mask = _context_pass(model, contexts, pad, device)
        totals = [[float(first[q, ids[0]]) for ids in qc] for q, qc in enumerate(choices)]
        rows = [(q, c) for q, qc in enumerate(choices) for c, ids in enumerate(qc) if len(ids) > 1]
        if rows:
            for (q, c), rest in zip(rows, _continuation_pass(model, cache, context_mask, choices, rows, pad, device)):
                totals[q][c] += rest
    return [(totals[q], len(contexts[q]) + sum(len(ids) for ids in choices[q])) for q in range(len(requests))]


def _context_pass(model, contexts: list[list[int]], pad: int, device: str):
    import torch

    width = max(len(ids) for ids in contexts)
    input_ids = torch.full((len(contexts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(contexts), width), dtype=torch.long)
    for row, ids in enumerate(contexts):  # left padding: every context ends at the last column
        input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
        mask[row, width - len(ids):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                use_cache=True, logits_to_keep=1)
    return torch.log_softmax(out.logits[:, -1].float(), dim=-1), out.cache, mask


def _continuation_pass(model, cache, context_mask, choices, rows, pad: int, device: str) -> list[float]:
    """Log-probability of tokens 2..n of each selected continuation, given its context and token 1."""
    import torch

    width = max(len(choices[q][c]) for q, c in rows) - 1
    feed = torch.full((len(rows), width), pad, dtype=torch.long)
    tail = torch.zeros((len(rows), width), dtype=torch.long)
    for row, (q, c) in enumerate(rows):
        ids = choices[q][c]
        feed[row, : len(ids) - 1] = torch.tensor(ids[:-1], dtype=torch.long)
        tail[row, : len(ids) - 1] = 1
    owner = torch.tensor([q for q, _ in rows], dtype=torch.long)
    cache.batch_select_indices(owner.to(device))
    mask = torch.cat([context_mask[owner], tail], dim=1)
    positions = context_mask[owner].sum(-1, keepdim=True) + torch.arange(width)
    hidden = model.get_decoder()(input_ids=feed.to(device), attention_mask=mask.to(device),
                                 position_ids=positions.to(device), cache=cache).last_hidden_state
    real = tail.bool().to(device)
    logprobs = torch.log_softmax(_lm_head(model, hidden[real]).float(), dim=-1)  # real positions only
    targets = torch.cat([torch.tensor(choices[q][c][1:], dtype=torch.long) for q, c in rows]).to(device)
    picked = logprobs.gather(1, targets[:, None])[:, 0]
    sums, start = [], 0
    for q, c in rows:
        n = len(choices[q][c]) - 1
        sums.append(float(picked[start:start + n].sum()))
        start += n
    return sums


def _lm_head(model, hidden):
    """The model's output projection, with its final logit soft-capping where it has one (Gemma 2)."""
    import torch

    logits = model.get_output_embeddings()(hidden)
    cap = getattr(model.config, "final_logit_softcapping", None)
    return logits if not cap else torch.tanh(logits / cap) * cap
