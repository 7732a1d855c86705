"""A tiny random chat model built offline in under a second, for smoke runs of sft/grpo/routing.

Real runs use SmolLM2-135M (stage ``models``). Tests and CI dry runs cannot download
anything, so this builds a byte-level BPE tokenizer with a ChatML template (the
template SmolLM2 uses) and a 2-layer Llama with random weights, and saves both with
``save_pretrained``: the folder loads exactly like a real checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tiny_model(out_dir: Path, corpus: Iterable[str] = (), vocab_size: int = 400, hidden_size: int = 32,
                     init_scale: float = 0.02,
                     layers: int = 2, seed: int = 0) -> Path:
    """Write a tokenizer + random ``LlamaForCausalLM`` to ``out_dir``; returns ``out_dir``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    base = Tokenizer(models.BPE())
    base.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    base.decoder = decoders.ByteLevel()
    texts = list(corpus) + ["Energy weight: 0.25 Query: what is 2 + 2? Models: small, large. Reply with the id."]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    base.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=base, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(str(out_dir))

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=1024, tie_word_embeddings=True, initializer_range=init_scale,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id,
                                               eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(str(out_dir))
    return out_dir
