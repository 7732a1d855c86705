"""The router as TRL sees it: a one-step policy over label tokens, computed from cached trunk features.

TRL's trainers talk to a causal LM through ``forward(input_ids, attention_mask, labels,
fused_lm_head=True)`` (per-token log-probabilities of the completion) and, for GRPO,
``generate``. ``attach_policy`` swaps in both for the router:

* Every training prompt is registered in a ``PolicyCache`` under the exact token ids TRL
  will pass (the rendered prompt plus a short row marker, so that each row is distinct).
  The marker maps the row to its query's cached trunk features and to its λ; the marker
  tokens themselves are never read by the model.
* The policy at weight λ is ``softmax_c((z_c(x) − λ·s·ê_c) / T)`` over the pool's label
  tokens: the decision rule of ``jouleroute.routing.lm.spec`` made stochastic. Sampling
  is restricted to label tokens, so every completion is a valid candidate.
* An SFT row stands for one query at *every* λ of the grid: its log-likelihood is the
  mean over the grid of ``log π_λ(label_λ | x)``, or of ``Σ_c q_λ(c) log π_λ(c | x)`` for
  soft targets (all λ of a query in one pass).

Only the last prompt position matters for a one-token action, so positions after it get
no score; the layout of the returned ``log_probs`` matches TRL's fused LM head.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Sequence

import torch

from jouleroute.routing.scores import energy_penalty
from jouleroute.training.trunk import TrunkSplit


@dataclass
class PolicyCache:
    split: TrunkSplit
    features: list[torch.Tensor]  # per query
    energy: torch.Tensor  # [queries, candidates] ê used by the decision rule
    label_ids: list[int]
    utility_scale: float
    temperature: float = 1.0
    keys: dict[tuple[int, ...], tuple[int, float]] = field(default_factory=dict)  # token ids -> (query, λ)
    sft_lambdas: torch.Tensor | None = None  # [grid]
    # [queries, grid] label index per λ (hard targets), or [queries, grid, labels] distributions (soft)
    sft_targets: torch.Tensor | None = None

    def register(self, token_ids: Sequence[int], query: int, lam: float) -> None:
        self.keys[tuple(int(t) for t in token_ids)] = (query, float(lam))

    def lookup(self, tokens: list[int]) -> tuple[int, float, int | None]:
        """(query, λ, action token or None) for one row's real tokens."""
        hit = self.keys.get(tuple(tokens))
        if hit is not None:
            return hit[0], hit[1], None
        hit = self.keys.get(tuple(tokens[:-1]))
        if hit is not None:
            return hit[0], hit[1], tokens[-1]
        raise KeyError(f"a training row of {len(tokens)} tokens is not a registered router prompt")

    def logits(self, queries: list[int]) -> torch.Tensor:
        """Label logits z(x) of each query, computing each distinct query once."""
        unique = sorted(set(queries))
        z = self.split.label_logits([self.features[q] for q in unique], self.label_ids)
        index = torch.tensor([unique.index(q) for q in queries])
        return z[index]


class _CachedRouterPolicy:
    """Mixed into the router LM's class while TRL trains it (see ``attach_policy``)."""

    _policy: PolicyCache

    def _rows(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None):
        mask = torch.ones_like(input_ids) if attention_mask is None else attention_mask
        rows = []
        for ids, keep in zip(input_ids.tolist(), mask.tolist()):
            real = [t for t, k in zip(ids, keep) if k]
            last = max(i for i, k in enumerate(keep) if k)
            rows.append((*self._policy.lookup(real), last))
        return rows

    def _tilted(self, rows) -> torch.Tensor:
        cache = self._policy
        queries = [r[0] for r in rows]
        lam = torch.tensor([r[1] for r in rows], dtype=cache.energy.dtype)
        z = cache.logits(queries)
        return z - energy_penalty(cache.energy[queries], lam[:, None], cache.utility_scale).to(z)

    def forward(self, input_ids=None, attention_mask=None, labels=None, fused_lm_head=False, **_kwargs):
        cache = self._policy
        rows = self._rows(input_ids, attention_mask)
        if any(r[2] is None for r in rows):
            raise ValueError("router policy forward needs prompt + one label token per row")
        position = {tok: i for i, tok in enumerate(cache.label_ids)}
        actions = torch.tensor([position.get(r[2], -1) for r in rows])
        if (actions < 0).any():
            raise ValueError("a completion is not a label token of the pool")
        queries = [r[0] for r in rows]
        if cache.sft_targets is not None:  # SFT: the row's labels at every λ of the grid
            z = cache.logits(queries)
            grid = cache.sft_lambdas.to(z)
            tilt = energy_penalty(cache.energy[queries].to(z)[:, None, :], grid[None, :, None], cache.utility_scale)
            logp_grid = torch.log_softmax(z[:, None, :] - tilt, dim=-1)  # [rows, grid, labels]
            targets = cache.sft_targets[queries]
            if targets.dim() == 3:  # soft: cross-entropy against the target distribution at each λ
                row_logp = (targets.to(logp_grid) * logp_grid).sum(-1).mean(dim=1)
                targets = targets.argmax(dim=-1)
            else:
                row_logp = logp_grid.gather(-1, targets[..., None]).squeeze(-1).mean(dim=1)
            top1 = (logp_grid.argmax(dim=-1) == targets).float().mean(dim=1)
            entropy = -(logp_grid.exp() * logp_grid).sum(-1).mean(dim=1)
        else:  # GRPO: the sampled action at the row's λ
            logp = torch.log_softmax(self._tilted(rows) / cache.temperature, dim=-1)
            row_logp = logp.gather(-1, actions[:, None]).squeeze(-1)
            top1 = (logp.argmax(dim=-1) == actions).float()
            entropy = -(logp.exp() * logp).sum(-1)
        width = input_ids.shape[1] - 1
        at = (torch.arange(len(rows)), torch.tensor([row[3] - 1 for row in rows]))  # positions predicting actions
        blank = torch.zeros((len(rows), width), dtype=row_logp.dtype)
        log_probs = blank.index_put(at, row_logp)  # out of place: keeps the autograd path
        entropy_map = blank.index_put(at, entropy.detach().to(blank.dtype))
        label_mask = torch.zeros((len(rows), width), dtype=torch.bool).index_put(at, torch.tensor(True))
        is_top1 = torch.zeros((len(rows), width), dtype=torch.bool).index_put(at, top1 > 0.5)
        return SimpleNamespace(log_probs=log_probs, entropy=entropy_map, label_mask=label_mask,
                               is_top1=is_top1, loss=-row_logp.mean(), aux_loss=None, logits=None)

    @torch.no_grad()
    def generate(self, input_ids=None, attention_mask=None, generation_config=None, **_kwargs):
        """Sample one label token per prompt from the policy at the prompt's λ."""
        cache = self._policy
        rows = self._rows(input_ids, attention_mask)
        temperature = float(getattr(generation_config, "temperature", None) or cache.temperature)
        probs = torch.softmax(self._tilted(rows) / temperature, dim=-1)
        picks = torch.multinomial(probs, 1).squeeze(-1)
        tokens = torch.tensor(cache.label_ids)[picks].to(input_ids)
        return torch.cat([input_ids, tokens[:, None]], dim=1)


def attach_policy(model, cache: PolicyCache):
    """Turn ``model`` (in place) into the cached router policy that TRL trains; undo with ``detach_policy``."""
    base = type(model)
    model.__class__ = type(f"CachedRouter{base.__name__}", (_CachedRouterPolicy, base), {})
    model._policy = cache
    model._policy_base_class = base
    return model


def detach_policy(model):
    """Restore the plain LM class (e.g. before ``save_pretrained``) and drop TRL's patched forward."""
    if "forward" in model.__dict__:  # TRL's fused LM head is an instance attribute
        del model.__dict__["forward"]
    base = model.__dict__.pop("_policy_base_class", None)
    if base is not None:
        model.__class__ = base
    model.__dict__.pop("_policy", None)
    return model


def release_fused_head(model) -> None:
    """TRL patches ``forward`` with its fused LM head at init; the policy computes log-probs itself."""
    if "forward" in model.__dict__:
        del model.__dict__["forward"]
