"""Route by scoring: one forward pass gives the router's scores over the whole pool.

``label_logits`` left-pads a batch of prompts, runs the model once with
``logits_to_keep=1`` and reads the logits of the candidates' label tokens at the answer
position. Every choice is a pool member by construction, even from an untrained model.
``LMScores`` keeps those scores, so a sweep over λ re-decides without re-reading the
query (``decide``): the λ term is applied outside the model (see ``lm_spec``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from jouleroute.routing.base import RoutingDecisions


@torch.inference_mode()
def label_logits(model, prompts: Sequence[Sequence[int]], label_ids: Sequence[int], pad_id: int) -> np.ndarray:
    """[prompts, labels] logits of the label tokens after each prompt (one left-padded forward pass)."""
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
        mask[row, width - len(prompt):] = 1
    positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
    device = model.device
    out = model(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
                logits_to_keep=1, use_cache=False)
    return out.logits[:, -1, list(label_ids)].float().cpu().numpy()


def decide(scores: np.ndarray, energy: np.ndarray, lam: float, scale: float) -> np.ndarray:
    """Column of ``argmax_c scores − λ·scale·ê_c`` per row; ties go to the cheaper candidate."""
    if lam < 0:
        raise ValueError(f"energy weight λ must be >= 0, got {lam}")
    value = np.asarray(scores, dtype=np.float64) - lam * scale * np.asarray(energy, dtype=np.float64)
    tied = value >= value.max(axis=1, keepdims=True) - 1e-9
    return np.argmin(np.where(tied, energy, np.inf), axis=1)


@dataclass
class LMScores:
    """The LM router's label scores for a batch of queries, to be decided at any λ of its range."""

    query_ids: list[str]
    candidates: list[str]
    scores: np.ndarray  # [queries, candidates] label logits
    energy: np.ndarray  # [queries, candidates] ê of each query's task
    utility_scale: float
    overhead_latency_s: list[float] = field(default_factory=list)
    overhead_energy_j: list[float] = field(default_factory=list)
    overhead_energy_source: str = "none"

    def decide(self, lam: float) -> RoutingDecisions:
        picks = decide(self.scores, self.energy, lam, self.utility_scale)
        return RoutingDecisions(
            query_ids=list(self.query_ids), candidate_ids=[self.candidates[i] for i in picks],
            overhead_latency_s=list(self.overhead_latency_s), overhead_energy_j=list(self.overhead_energy_j),
            overhead_energy_source=self.overhead_energy_source)
