"""Devices, threads, precision and tokenizers: shared by the backends, routing (inference) and training."""

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


def native_bf16_cpu() -> bool:
    """The CPU multiplies bfloat16 matrices in hardware (AMX tiles or AVX512-BF16): there bf16 inference
    is ~3x faster than fp32 (a 6-layer SmolLM2 pass, 1 thread: benchmarks/README.md); without it, slower."""
    cpu = torch.cpu
    return any(getattr(cpu, probe, lambda: False)() for probe in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"))


def inference_dtype(precision: str, device: str) -> torch.dtype:
    """A router's weights and activations: bf16 when asked, on CUDA under ``auto`` or ``native``, and under
    ``native`` on a CPU with bf16 matrix units; fp32 otherwise (``auto`` on any CPU: the same figures on
    every machine). Training keeps ``use_bf16``: fp32 on every CPU."""
    native = precision == "native" and (device == "cuda" or (device == "cpu" and native_bf16_cpu()))
    if precision == "bf16" or native or (precision == "auto" and device == "cuda"):
        return torch.bfloat16
    return torch.float32


def load_tokenizer(model_path: str | Path, padding_side: str = "right") -> PreTrainedTokenizerBase:
    tokenizer = AutoTokenizer.from_pretrained(str(model_path), padding_side=padding_side)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
