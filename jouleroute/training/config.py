"""Typed params for the router stages: ``router_data``, ``sft``, ``grpo``, and the LM router.

Defaults are sized for the 2-core CPU: router_data + sft + grpo on SmolLM2-135M with
~100 train queries finish in a few minutes (see docs/router-training.md for timings).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from jouleroute.strict import StrictModel
from jouleroute.training.utility import EnergyNorm

Precision = Literal["auto", "fp32", "bf16"]  # auto: bf16 on CUDA, fp32 on CPU
Device = Literal["auto", "cpu", "cuda"]


def _check_lambdas(values: tuple[float, ...]) -> tuple[float, ...]:
    if not values:
        raise ValueError("the λ grid needs at least one value")
    if any(v < 0 for v in values):
        raise ValueError(f"energy weights λ must be >= 0, got {list(values)}")
    if len(set(values)) != len(values):
        raise ValueError(f"duplicate λ in grid {list(values)}")
    return tuple(float(v) for v in values)


class RouterDataConfig(StrictModel):
    """How router datasets are built from the TRAIN (and VAL) split of the profile."""

    label_policy: Literal["utility", "expected_utility", "cheapest_correct"] = "expected_utility"
    # expected_utility only: pseudo-counts of the task-accuracy prior (0 = the utility label)
    prior_strength: float = Field(default=4.0, ge=0)
    # when no candidate was right (cheapest_correct only)
    fallback: Literal["cheapest", "most_accurate_on_task"] = "cheapest"
    paradigm: Literal["bare", "informed"] = "bare"
    # SFT λ grid; with label_policy=cheapest_correct the label ignores λ and only 0 is used.
    # expected_utility trades between 0 and ~2; the 0/1 utility label only moves above 1
    # (a right answer scores >= 1 - λ > 0, a wrong one <= 0): give it a grid like (0, 2, 4, 8, 16).
    lambdas: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0)
    # λ values drawn per train query for SFT (null: the whole grid); bounds SFT cost
    lambdas_per_query: int | None = Field(default=1, ge=1)
    energy_norm: EnergyNorm = "max"
    energy_column: Literal["energy_j", "energy_net_j"] = "energy_j"
    max_question_chars: int = Field(default=200, ge=20)  # head + tail kept, middle cut
    max_train_queries: int | None = Field(default=None, ge=1)  # subsample (seeded) for budget
    # held-out (val) queries kept for the grpo stage's check; each costs one routing per λ
    max_val_queries: int | None = Field(default=None, ge=1)
    allow_mixed_energy_sources: bool = False
    seed: int = 0

    @field_validator("lambdas")
    @classmethod
    def _grid(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        return _check_lambdas(value)


class LoraParams(StrictModel):
    """LoRA adapter settings; merged into the base weights when the stage saves its model."""

    r: int = Field(default=16, ge=1)
    alpha: int = Field(default=32, ge=1)
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0)
    target_modules: str | tuple[str, ...] = "all-linear"


class _TrainParams(StrictModel):
    seed: int = 0
    learning_rate: float = Field(gt=0)
    max_steps: int = Field(default=-1, ge=-1)  # -1: run by epochs
    logging_steps: int = Field(default=5, ge=1)
    save_steps: int = Field(default=25, ge=1)  # checkpoints under out_dir/checkpoints (resume)
    save_total_limit: int = Field(default=2, ge=1)
    lora: LoraParams | None = None  # null: full fine-tuning
    # train only the top N decoder layers (null: all). 4 makes a step ~2.3x cheaper on CPU.
    train_last_layers: int | None = Field(default=4, ge=1)
    precision: Precision = "auto"
    device: Device = "auto"
    # torch CPU threads (null: torch's default). 1 can be faster on a CPU shared with other jobs.
    threads: int | None = Field(default=None, ge=1)
    log_model: bool = True  # final router as an MLflow artifact
    registered_model_name: str | None = None  # also register it under this name


class SftConfig(_TrainParams):
    """Supervised fine-tuning on sft.jsonl (TRL SFTTrainer, loss on the completion only)."""

    # a key of params `models` (converted by the `models` stage), a local folder, or a hub id;
    # the stage resolves it to the ``base_model_dir`` that run_sft receives
    base_model: str = "smollm2-135m"
    # high because only the top layers train for ~13 steps on CPU; use ~5e-5 for full fine-tuning
    learning_rate: float = Field(default=5e-4, gt=0)
    epochs: float = Field(default=1.0, gt=0)
    batch_size: int = Field(default=8, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    max_length: int = Field(default=512, ge=16)  # a longer example is an error, never cut


class GrpoConfig(_TrainParams):
    """GRPO from the SFT checkpoint, one prompt per (train query, λ in ``lambdas``)."""

    learning_rate: float = Field(default=1e-5, gt=0)
    max_steps: int = Field(default=12, ge=1)
    logging_steps: int = Field(default=2, ge=1)
    save_steps: int = Field(default=4, ge=1)
    lambdas: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 2.0)  # see RouterDataConfig.lambdas
    rewards: dict[str, float] = {"correctness": 1.0, "energy_penalty": 1.0, "format": 0.5}
    energy_norm: EnergyNorm = "max"
    num_generations: int = Field(default=4, ge=2)
    batch_size: int = Field(default=8, ge=2)  # completions per step = prompts per step x num_generations
    grad_accum: int = Field(default=1, ge=1)
    max_completion_length: int = Field(default=8, ge=1)
    temperature: float = Field(default=1.0, gt=0)
    beta: float = Field(default=0.04, ge=0)  # KL weight toward the SFT model (0: no reference, no KL)

    @field_validator("lambdas")
    @classmethod
    def _grid(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        return _check_lambdas(value)

    @field_validator("rewards")
    @classmethod
    def _known_rewards(cls, value: dict[str, float]) -> dict[str, float]:
        from jouleroute.training.rewards import REWARDS  # local: rewards imports nothing heavy

        unknown = sorted(set(value) - set(REWARDS))
        if unknown:
            raise ValueError(f"unknown reward(s) {unknown}; valid: {', '.join(sorted(REWARDS))}")
        if not value:
            raise ValueError("grpo.rewards needs at least one reward")
        return value

    @model_validator(mode="after")
    def _divisible(self) -> "GrpoConfig":
        if (self.batch_size * self.grad_accum) % self.num_generations:
            raise ValueError(
                f"grpo.batch_size x grad_accum ({self.batch_size} x {self.grad_accum}) must be divisible by "
                f"num_generations ({self.num_generations})"
            )
        return self


class RouterConfig(StrictModel):
    """Inference with a trained router (jouleroute.routing.lm_router.LMRouter)."""

    batch_size: int = Field(default=16, ge=1)
    lam: float = Field(default=2.0, ge=0)  # energy weight when route() is not given one
    # how a batch window's energy is split across its queries (latency: each query waited the window)
    overhead_split: Literal["even", "tokens"] = "tokens"
    device: Device = "auto"
    precision: Precision = "auto"
    # torch CPU threads while routing (null: torch's default). On a 2-core box shared with
    # another job two threads made CPU generation slower than one (benchmarks/README.md).
    threads: int | None = Field(default=None, ge=1)

