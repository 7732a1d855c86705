"""Devices, threads, precision and tokenizers: shared by routing (inference) and training."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase


def set_threads(threads: int | None) -> None:
    if threads is not None:
        torch.set_num_threads(threads)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested (backend.device, router.device or a training device) but "
                           "torch sees no CUDA GPU; use device: auto or cpu")
    return device


def use_bf16(precision: str, device: str) -> bool:
    """bf16 on CUDA under ``auto``; fp32 on CPU, where TRL's bf16 default fails or crawls."""
    return precision == "bf16" or (precision == "auto" and device == "cuda")


def load_tokenizer(model_path: str | Path, padding_side: str = "right") -> PreTrainedTokenizerBase:
    tokenizer = AutoTokenizer.from_pretrained(str(model_path), padding_side=padding_side)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
