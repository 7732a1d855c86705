"""Route by scoring: one forward pass gives the router's scores over the whole pool.

``label_logits`` left-pads a batch of prompts, runs the decoder once and applies the label
rows of the head at the answer position. Every choice is a pool member by construction, even
from an untrained model. ``LMRouter.score`` keeps those logits as the merit of a ``Scores``, so a
sweep over λ re-decides without re-reading the query: the λ term is applied outside the model
(see ``lm_spec``).

Every router prompt opens with the same tokens (the chat template's system turn and the user
header, about a third of a mean prompt). ``SharedPrefix`` keeps their keys and values, computed
once per model, device and dtype; prompts that start with them are scored from there on
(right-padded suffixes, positions continuing after the prefix), the rest as before. The result is
the same computation in another order: the label logits agree with the uncached path to float
rounding (tests/routing/test_prefix_cache.py).

``length_batches`` groups prompts of similar length, so few padding tokens are computed: the
gateway's passes hold whatever arrived together, and 16 random replay-study queries padded to
the longest would compute about twice their real tokens.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from transformers import DynamicCache


def left_padded(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input ids, attention mask, position ids) of a left-padded batch: every prompt ends in the last
    column, and real tokens keep positions 0..n-1 whatever the padding."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, width - len(prompt):] = 1
    return ids, mask, (mask.cumsum(dim=1) - 1).clamp(min=0)


# A batch may carry this share of padding before the next (longer) prompt starts a new batch ...
PADDING_SLACK = 0.25
# ... unless the padding is fewer tokens than this: a pass's fixed cost (a python call and a dispatch
# per layer) is about that of a few dozen tokens on a CPU, so tiny batches would not pay for themselves.
MIN_PADDING_TOKENS = 64


def length_batches(lengths: Sequence[int], size: int, slack: float = PADDING_SLACK,
                   min_padding: int = MIN_PADDING_TOKENS) -> list[list[int]]:
    """Indices of ``lengths``, shortest first, cut into batches of at most ``size``; a batch also
    closes when the next prompt would make its padding exceed both ``slack`` of its real tokens and
    ``min_padding`` tokens (every row is padded to the batch's longest)."""
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in sorted(range(len(lengths)), key=lambda j: lengths[j]):
        n = lengths[i]
        padding = n * (len(current) + 1) - (real + n)
        if current and (len(current) == size or padding > max(slack * (real + n), min_padding)):
            batches.append(current)
            current, real = [], 0
        current.append(i)
        real += n
    if current:
        batches.append(current)
    return batches


def common_prefix(prompts: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The longest run of tokens every prompt starts with."""
    first = list(prompts[0])
    n = min(len(p) for p in prompts)
    for prompt in prompts[1:]:
        n = next((i for i in range(n) if prompt[i] != first[i]), n)
    return tuple(first[:n])


class SharedPrefix:
    """The keys and values of a token prefix, computed on first use for each (device, dtype) of a model.

    Held by one router for its one model; the cached tensors are only ever read (each batch gets
    its own cache object whose first entries are views of them), so batches cannot disturb each other.
    """

    def __init__(self, tokens: Sequence[int]) -> None:
        if not tokens:
            raise ValueError("a shared prefix needs at least one token")
        self.tokens = tuple(int(t) for t in tokens)
        self._kv: dict[tuple[str, torch.dtype], list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def __len__(self) -> int:
        return len(self.tokens)

    def fits(self, prompt: Sequence[int]) -> bool:
        """The prompt starts with the prefix and has at least one token after it (the one read)."""
        return len(prompt) > len(self.tokens) and tuple(prompt[: len(self.tokens)]) == self.tokens

    @torch.no_grad()
    def kv(self, model) -> list[tuple[torch.Tensor, torch.Tensor]]:
        key = (str(model.device), model.dtype)
        if key not in self._kv:
            ids = torch.tensor([self.tokens], dtype=torch.long, device=model.device)
            cache = model.base_model(input_ids=ids, use_cache=True).cache
            self._kv[key] = [(layer.keys, layer.values) for layer in cache.layers]
        return self._kv[key]


def _last_hidden_uncached(model, prompts: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    ids, mask, positions = left_padded(prompts, pad_id)
    device = model.device
    return model.base_model(input_ids=ids.to(device), attention_mask=mask.to(device),
                            position_ids=positions.to(device), use_cache=False).last_hidden_state[:, -1]


def _last_hidden_after_prefix(model, prefix: SharedPrefix, prompts: Sequence[Sequence[int]],
                              pad_id: int) -> torch.Tensor:
    """Final hidden state at each prompt's last token, the prefix's keys and values read from the cache.

    Suffixes are right-padded: a real token never attends to a pad (pads come after it), so each
    row's last real token sees exactly its prompt, at the positions the uncached path gives it.
    """
    start, device = len(prefix), model.device
    suffixes = [list(p[start:]) for p in prompts]
    rows, width = len(suffixes), max(len(s) for s in suffixes)
    ids = torch.full((rows, width), pad_id, dtype=torch.long)
    mask = torch.zeros((rows, start + width), dtype=torch.long)
    mask[:, :start] = 1
    for row, suffix in enumerate(suffixes):
        ids[row, : len(suffix)] = torch.tensor(suffix, dtype=torch.long)
        mask[row, start: start + len(suffix)] = 1
    positions = torch.arange(start, start + width).expand(rows, width)
    # expand() gives views; the cache's update concatenates into new tensors, leaving the prefix's intact
    cache = DynamicCache(ddp_cache_data=[(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1))
                                         for k, v in prefix.kv(model)], config=model.config)
    hidden = model.base_model(input_ids=ids.to(device), attention_mask=mask.to(device),
                              position_ids=positions.to(device), cache=cache, use_cache=True).last_hidden_state
    last = torch.tensor([len(s) - 1 for s in suffixes], device=device)
    return hidden[torch.arange(rows, device=device), last]


@torch.inference_mode()
def label_logits(model, prompts: Sequence[Sequence[int]], label_ids: Sequence[int], pad_id: int,
                 prefix: SharedPrefix | None = None) -> np.ndarray:
    """[prompts, labels] logits of the label tokens after each prompt (one forward pass per kind of row).

    With ``prefix``, the prompts that start with it are scored after its cached keys and values,
    the others (if any) by the uncached left-padded pass. Only the label rows of the output head
    are applied, to the last position: the full head (49k tokens x hidden) would cost as much as a
    few decoder layers, and its extras (e.g. a logit soft-cap) are not what training fits
    (``TrunkSplit.label_logits`` does the same).
    """
    cached = [i for i, p in enumerate(prompts) if prefix is not None and prefix.fits(p)]
    plain = sorted(set(range(len(prompts))) - set(cached))
    last = torch.empty((len(prompts), model.config.hidden_size), dtype=model.dtype, device=model.device)
    if cached:
        last[cached] = _last_hidden_after_prefix(model, prefix, [prompts[i] for i in cached], pad_id)
    if plain:
        last[plain] = _last_hidden_uncached(model, [prompts[i] for i in plain], pad_id)
    head = model.get_output_embeddings()
    logits = last.float() @ head.weight[list(label_ids)].float().T
    if getattr(head, "bias", None) is not None:
        logits = logits + head.bias[list(label_ids)].float()
    return logits.cpu().numpy()
