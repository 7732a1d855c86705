"""Constrained greedy decoding: the LM router can only ever emit a candidate id of its pool.

Choice made: a prefix trie over the candidates' token sequences, enforced by a
``LogitsProcessor`` inside ``model.generate`` (greedy). At each step every token that
does not continue some candidate id gets −inf, and end-of-turn is allowed only once a
full id has been produced. The alternative — scoring each candidate's full sequence
log-probability — costs one forward pass per candidate per query (K× the compute for a
K-model pool) and ranks ids by their length-dependent total probability; greedy
decoding costs at most ``max id length + 1`` cached steps per batch and matches what
the model does when sampled by GRPO. Even an untrained model therefore returns a
valid id.

Candidate token sequences are read off the chat template (prompt vs prompt+answer),
exactly as TRL tokenizes an SFT completion, so the trie matches training.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList, PreTrainedTokenizerBase


@dataclass
class TrieNode:
    children: dict[int, "TrieNode"] = field(default_factory=dict)
    candidate: str | None = None  # set where a full candidate id ends


def _ids(encoded) -> list[int]:
    # transformers 5 returns a BatchEncoding from apply_chat_template(tokenize=True)
    return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


def candidate_token_ids(tokenizer: PreTrainedTokenizerBase, candidates: Sequence[str]) -> dict[str, list[int]]:
    """Token ids of each candidate id as the assistant's reply (chat-template context)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("the router's tokenizer has no chat template; router prompts are chat conversations")
    probe = [{"role": "user", "content": "q"}]
    prompt = _ids(tokenizer.apply_chat_template(probe, add_generation_prompt=True, tokenize=True))
    out: dict[str, list[int]] = {}
    for cid in candidates:
        full = _ids(tokenizer.apply_chat_template(probe + [{"role": "assistant", "content": cid}], tokenize=True))
        if full[: len(prompt)] != prompt:
            raise ValueError(f"chat template renders the prompt differently once an answer follows ({cid!r})")
        tail = full[len(prompt):]
        # the reply's tokens are the shortest prefix of the tail that decodes to the id
        cut = next((k for k in range(1, len(tail) + 1) if tokenizer.decode(tail[:k]).strip() == cid), None)
        if cut is None:
            raise ValueError(f"cannot find candidate id {cid!r} in its tokenized reply {tail}")
        out[cid] = tail[:cut]
    seqs = [tuple(v) for v in out.values()]
    if len(set(seqs)) != len(seqs):
        raise ValueError(f"two candidates tokenize identically: {out}")
    return out


class CandidateTrie:
    """Prefix trie over candidate token sequences."""

    def __init__(self, sequences: dict[str, list[int]]):
        self.root = TrieNode()
        for cid, ids in sequences.items():
            node = self.root
            for token in ids:
                node = node.children.setdefault(token, TrieNode())
            node.candidate = cid
        self.max_depth = max(len(ids) for ids in sequences.values())

    def walk(self, tokens: Sequence[int]) -> TrieNode | None:
        node = self.root
        for token in tokens:
            node = node.children.get(int(token))
            if node is None:
                return None
        return node

    def resolve(self, tokens: Sequence[int], stop_ids: set[int]) -> str:
        """The candidate a generated sequence names (stopping at end-of-turn / padding)."""
        node = self.root
        for token in tokens:
            if int(token) in stop_ids or int(token) not in node.children:
                break
            node = node.children[int(token)]
        while node.candidate is None:  # unreachable with the processor on; keeps the guarantee total
            node = next(iter(node.children.values()))
        return node.candidate


class TrieLogitsProcessor(LogitsProcessor):
    """Masks every token that would leave the trie; end-of-turn only after a full id."""

    def __init__(self, trie: CandidateTrie, prompt_len: int, eos_ids: Sequence[int]):
        self.trie, self.prompt_len, self.eos_ids = trie, prompt_len, list(eos_ids)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        mask = torch.full_like(scores, float("-inf"))
        for row in range(input_ids.shape[0]):
            node = self.trie.walk(input_ids[row, self.prompt_len:].tolist())
            if node is None:  # finished row (eos then padding): generate() overrides it anyway
                mask[row] = 0.0
                continue
            allowed = list(node.children) + (self.eos_ids if node.candidate is not None else [])
            mask[row, allowed] = 0.0
        return scores + mask


def eos_ids(model, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    declared = model.generation_config.eos_token_id
    ids = [declared] if isinstance(declared, int) else list(declared or [])
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


@torch.inference_mode()
def constrained_choices(model, tokenizer: PreTrainedTokenizerBase, prompts: list[list[dict[str, str]]],
                        trie: CandidateTrie) -> tuple[list[str], list[int]]:
    """Greedy, trie-constrained choice for each prompt; also returns each prompt's token count."""
    texts = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    width = batch["input_ids"].shape[1]
    stops = eos_ids(model, tokenizer)
    out = model.generate(
        **batch, do_sample=False, num_beams=1, max_new_tokens=trie.max_depth + 1,
        logits_processor=LogitsProcessorList([TrieLogitsProcessor(trie, width, stops)]),
        eos_token_id=stops, pad_token_id=tokenizer.pad_token_id, temperature=None, top_p=None, top_k=None,
    )
    stop_set = set(stops) | ({tokenizer.pad_token_id} if tokenizer.pad_token_id is not None else set())
    choices = [trie.resolve(row[width:].tolist(), stop_set) for row in out]
    return choices, batch["attention_mask"].sum(dim=1).tolist()
