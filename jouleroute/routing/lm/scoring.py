"""Route by scoring: one forward pass gives the router's scores over the whole pool.

``label_logits`` left-pads a batch of prompts, runs the model once with
``logits_to_keep=1`` and reads the logits of the candidates' label tokens at the answer
position. Every choice is a pool member by construction, even from an untrained model.
``LMRouter.score`` keeps those logits as the merit of a ``Scores``, so a sweep over λ re-decides
without re-reading the query: the λ term is applied outside the model (see ``lm_spec``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch


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


@torch.inference_mode()
def label_logits(model, prompts: Sequence[Sequence[int]], label_ids: Sequence[int], pad_id: int) -> np.ndarray:
    """[prompts, labels] logits of the label tokens after each prompt (one left-padded forward pass).

    Only the label rows of the output head are applied, to the last position: the full head
    (49k tokens x hidden) would cost as much as a few decoder layers, and its extras (e.g. a
    logit soft-cap) are not what training fits (``TrunkSplit.label_logits`` does the same).
    """
    ids, mask, positions = left_padded(prompts, pad_id)
    device = model.device
    last = model.base_model(input_ids=ids.to(device), attention_mask=mask.to(device),
                            position_ids=positions.to(device), use_cache=False).last_hidden_state[:, -1]
    head = model.get_output_embeddings()
    logits = last.float() @ head.weight[list(label_ids)].float().T
    if getattr(head, "bias", None) is not None:
        logits = logits + head.bias[list(label_ids)].float()
    return logits.cpu().numpy()
