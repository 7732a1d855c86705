"""Build the configured backend for one model of the pool."""

from __future__ import annotations

from pathlib import Path

from jouleroute.backends.base import Backend
from jouleroute.backends.config import BackendConfig
from jouleroute.models import model_location
from jouleroute.pool import ModelSpec


def make_backend(cfg: BackendConfig, model_name: str, spec: ModelSpec, models_dir: Path,
                 base_url: str | None = None, api_key_env: str | None = None) -> Backend:
    """``transformers``/``vllm`` load the model in-process; ``openai`` talks to ``base_url`` (a pool entry's own
    server) or ``cfg.base_url``, with at most ``cfg.concurrency`` requests in flight to that server."""
    if cfg.kind == "openai":
        from jouleroute.backends.openai_backend import OpenAIBackend

        served = spec.served_name or model_name
        return OpenAIBackend(
            base_url or cfg.base_url, served, api_key_env or cfg.api_key_env, cfg.concurrency, cfg.timeout_s,
            cfg.max_retries, cfg.stream,
        )
    if spec.source == "served":
        raise ValueError(
            f"models.{model_name} has source 'served' (it lives behind a server) but backend.kind is "
            f"'{cfg.kind}'; set backend.kind='openai' and backend.base_url"
        )
    location = model_location(model_name, spec, models_dir)
    if spec.source in ("pypi-gguf", "local") and not (Path(location) / "config.json").is_file():
        hint = "run the `models` stage first" if spec.source == "pypi-gguf" else f"check models.{model_name}.path"
        raise FileNotFoundError(f"models.{model_name}: no transformers folder at {location} ({hint})")
    if cfg.kind == "vllm":
        from jouleroute.backends.vllm_backend import VLLMBackend

        return VLLMBackend(location, dtype=spec.dtype)
    from jouleroute.backends.transformers_backend import TransformersBackend

    return TransformersBackend(location, cfg.device, spec.dtype, cfg.torch_threads)
