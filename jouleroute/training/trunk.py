"""A frozen trunk and trained top layers: the router trains on hidden states computed once.

Only the top ``train_last_layers`` decoder layers (and the final norm) of the router LM
are trained. Everything below is frozen, so its output for a prompt never changes
during training: ``TrunkFeatures`` computes it once per prompt (the residual stream
entering the first trained layer) and training runs only the top layers on it. One
SFT epoch over 2,019 queries then costs about ``train_last_layers / num_layers`` of a
forward pass per query instead of a forward and a backward through the whole model.
The top layers are the model's own modules, so the trained weights land in the full
model, which is saved as an ordinary checkpoint.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from typing import Sequence

import torch
from torch import nn

log = logging.getLogger(__name__)


def _submodel(backbone: nn.Module, start: int, stop: int, norm: nn.Module) -> nn.Module:
    """A view of ``backbone`` with only its layers ``start:stop`` (shared, not copied) and ``norm`` at the end."""
    layers = list(backbone.layers)[start:stop]
    view = copy.copy(backbone)
    view._modules = dict(backbone._modules)
    view.layers = nn.ModuleList(layers)
    view.norm = norm
    view.config = copy.deepcopy(backbone.config)
    view.config.num_hidden_layers = len(layers)
    if getattr(view.config, "layer_types", None):
        view.config.layer_types = list(view.config.layer_types)[start:stop]
    return view


def keep_first_layers(model: nn.Module, n: int | None) -> nn.Module:
    """Early exit, in place: keep the first ``n`` decoder layers (None or more than there are: all).

    The router then reads the residual stream after layer ``n`` through the final norm and the
    label rows of the head; its checkpoint is an ordinary, smaller model (config says ``n``), so
    routing costs about ``n / num_layers`` of the full model per token.
    """
    backbone = model.base_model
    if n is None or n >= len(backbone.layers):
        return model
    if n < 1:
        raise ValueError(f"router_layers must be >= 1, got {n}")
    backbone.layers = nn.ModuleList(list(backbone.layers)[:n])
    model.config.num_hidden_layers = n
    if getattr(model.config, "layer_types", None):
        model.config.layer_types = list(model.config.layer_types)[:n]
    return model


class TrunkSplit:
    """The router LM cut into a frozen trunk and ``train_last_layers`` trained top layers."""

    def __init__(self, model: nn.Module, train_last_layers: int | None):
        backbone = model.base_model
        layers = list(backbone.layers)
        k = len(layers) if train_last_layers is None else min(train_last_layers, len(layers))
        self.model, self.n_frozen, self.n_trained = model, len(layers) - k, k
        self.bottom = _submodel(backbone, 0, self.n_frozen, nn.Identity())
        self.top = _submodel(backbone, self.n_frozen, len(layers), backbone.norm)
        for param in model.parameters():
            param.requires_grad_(False)
        for param in list(self.top.layers.parameters()) + list(backbone.norm.parameters()):
            param.requires_grad_(True)
        head = model.get_output_embeddings()
        self.head_weight, self.head_bias = head.weight, getattr(head, "bias", None)

    def sizes(self) -> dict[str, int]:
        trainable = sum(p.numel() for p in self.model.parameters() if p.requires_grad)
        return {"trainable_params": trainable, "total_params": sum(p.numel() for p in self.model.parameters()),
                "frozen_layers": self.n_frozen, "trained_layers": self.n_trained}

    def fingerprint(self, prompts: Sequence[Sequence[int]]) -> str:
        """Identifies trunk weights + prompts: cached features are reused only under the same key."""
        digest = hashlib.sha256()
        for name, tensor in sorted(self.bottom.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().float().cpu().numpy().tobytes())
        for prompt in prompts:
            digest.update(bytes(str(list(prompt)), "ascii"))
        return digest.hexdigest()[:16]

    @torch.no_grad()
    def features(self, prompts: Sequence[Sequence[int]], batch_size: int = 16, pad_id: int = 0,
                 progress=None) -> list[torch.Tensor]:
        """Hidden states entering the first trained layer, [tokens, hidden] per prompt (unpadded)."""
        out: list[torch.Tensor | None] = [None] * len(prompts)
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        device = self.head_weight.device
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            width = max(len(prompts[i]) for i in batch)
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for row, i in enumerate(batch):  # right padding: real tokens keep positions 0..n-1
                ids[row, : len(prompts[i])] = torch.tensor(list(prompts[i]))
                mask[row, : len(prompts[i])] = 1
            hidden = self.bottom(input_ids=ids.to(device), attention_mask=mask.to(device),
                                 use_cache=False).last_hidden_state
            for row, i in enumerate(batch):
                out[i] = hidden[row, : len(prompts[i])].to(torch.float32).cpu().clone()
            if progress is not None:
                progress(len(batch))
            done = start + len(batch)
            if done * 10 // len(order) > start * 10 // len(order):  # a log line every ~10%
                log.info("trunk features: %d / %d prompts", done, len(order))
        return out  # type: ignore[return-value]

    def label_logits(self, features: Sequence[torch.Tensor], label_ids: Sequence[int]) -> torch.Tensor:
        """[prompts, labels] label logits from cached features through the trained top layers."""
        width = max(f.shape[0] for f in features)
        device = self.head_weight.device
        hidden = torch.zeros((len(features), width, features[0].shape[1]), dtype=self.head_weight.dtype,
                             device=device)
        mask = torch.zeros((len(features), width), dtype=torch.long, device=device)
        for row, feats in enumerate(features):  # left padding: the answer position is the last column
            hidden[row, width - feats.shape[0]:] = feats.to(device=device, dtype=hidden.dtype)
            mask[row, width - feats.shape[0]:] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        last = self.top(inputs_embeds=hidden, attention_mask=mask, position_ids=positions,
                        use_cache=False).last_hidden_state[:, -1]
        weight = self.head_weight[list(label_ids)]
        logits = last @ weight.T
        if self.head_bias is not None:
            logits = logits + self.head_bias[list(label_ids)]
        return logits
