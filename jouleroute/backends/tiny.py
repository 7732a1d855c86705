"""The one tiny-model builder: a small random-weight Llama and its tokenizer, built locally with no download.

Tests use it (hidden size 16: fast, deterministic; the router tests train a wider one on their own
corpus), and so does the GPU check (wider and deeper, to draw measurable power). The tokenizer is a
byte-level BPE trained on a few sentences, with a ChatML chat template (SmolLM2's), so chat and plain
prompts both work; the folder loads exactly like a real ``save_pretrained`` checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from jouleroute.provenance import seed_everything

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Question: What is 12 plus 30? Answer: 42.",
    "Energy is measured in joules; power in watts is joules per second.",
    "A router sends each query to the cheapest model that still answers it correctly.",
    "0 1 2 3 4 5 6 7 8 9 ten eleven twelve, A B C D options.",
]


def build_tokenizer(vocab_size: int = 512, corpus: list[str] | None = None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_CORPUS * 4 if corpus is None else corpus, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_llama(
    folder: Path,
    hidden_size: int = 16,
    num_layers: int = 2,
    num_heads: int = 2,
    intermediate_size: int | None = None,
    initializer_range: float = 0.3,
    seed: int = 0,
    *,
    corpus: list[str] | None = None,
    vocab_size: int = 512,
    kv_heads: int | None = None,
    max_positions: int = 2048,
) -> Path:
    """Write a random LlamaForCausalLM + tokenizer to ``folder`` (save_pretrained layout). ``corpus``: the
    sentences the tokenizer is trained on (default: a few general ones)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer(vocab_size, corpus)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=kv_heads or num_heads,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
        # Wider than the usual 0.02 so greedy output varies instead of repeating one token.
        initializer_range=initializer_range,
    )
    seed_everything(seed)
    model = LlamaForCausalLM(config)
    folder = Path(folder)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
