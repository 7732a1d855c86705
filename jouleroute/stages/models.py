"""Stage `models`: convert the pool's packaged GGUF models once.

Dequantizes each `pypi-gguf` model used by the pool into paths.models_dir/<name>
(save_pretrained), with a manifest holding the GGUF sha256. Skipped when already converted.
"""

from __future__ import annotations

import logging

from jouleroute.models import run_models
from jouleroute.stages.context import StageContext

logger = logging.getLogger(__name__)


def models_stage(ctx: StageContext) -> dict:
    # every packaged model in `models` (the pool's and the router's base model)
    ctx.path("models_dir").mkdir(parents=True, exist_ok=True)  # a DVC out even when every model is external
    result = run_models(ctx.params.models, ctx.path("models_dir"))
    for name, info in result.items():
        logger.info("model %s: %s (%s)", name, info.get("status"), info.get("path"))
    with ctx.stage_run("models") as run:
        if run is not None:
            run.log_metrics({"n_models": len(result)})
            run.log_dict(result, "models.json")
    return result
