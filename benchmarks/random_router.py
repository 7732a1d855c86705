"""A router folder with a trained router's architecture, tokenizer and spec, and random weights: what an LM router
costs to run, on a host that has no trained weights (a lent GPU machine: a trained folder is too big to carry).

    python benchmarks/random_router.py TEMPLATE OUT

TEMPLATE needs config.json, router_spec.json and the tokenizer files (a trained router folder, weights not read);
OUT gets the same files, random weights of the same shapes (seeded), and RANDOM_WEIGHTS.txt, which
bench_gateway.py records as ``lm_router_weights: random``. Its routing decisions mean nothing; its cost is the
trained router's.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def main(template: Path, out: Path) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    for path in template.iterdir():
        if path.is_file() and path.name not in WEIGHTS and not path.name.endswith(".safetensors"):
            shutil.copy2(path, out / path.name)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(template)))
    model.save_pretrained(str(out))
    (out / "RANDOM_WEIGHTS.txt").write_text(f"random weights in the architecture of {template}\n")
    print(f"{out}: {sum(p.numel() for p in model.parameters()):,} parameters, random", file=sys.stderr)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))
