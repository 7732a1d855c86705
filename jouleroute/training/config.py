"""Typed params for the router stages: ``router_data``, ``sft``, ``grpo``, and the LM router.

Defaults are sized for the 2-core CPU: only the top layers train, on trunk features
computed once per prompt (see docs/router-training.md for timings).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from jouleroute.strict import StrictModel

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
    # The trained λ grid. λ is applied at decision time, so SFT fits each query's labels at every
    # λ of the grid in one pass and routing accepts any λ inside [min, max] of it.
    lambdas: tuple[float, ...] = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
    # the energy column, its norm and whether sources may mix: params `energy_policy` (one for every stage)
    labels: tuple[str, ...] | None = None  # one single-token label per candidate (null: A, B, C, ...)
    utility_scale: float = Field(default=10.0, gt=0)  # logits per unit of utility in the decision rule
    max_query_tokens: int = Field(default=96, ge=8)  # token budget of the query text: head and tail kept
    strip_scaffold: bool = True  # drop the text every TRAIN prompt of a task shares (few-shot blocks)
    max_train_queries: int | None = Field(default=None, ge=1)  # subsample (seeded) for budget
    # held-out (val) queries kept for the grpo stage's check; each costs one routing per λ
    max_val_queries: int | None = Field(default=None, ge=1)
    seed: int = 0

    @field_validator("lambdas")
    @classmethod
    def _grid(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        return _check_lambdas(value)


class _TrainParams(StrictModel):
    seed: int = 0
    learning_rate: float = Field(gt=0)
    max_steps: int = Field(default=-1, ge=-1)  # -1: run by epochs
    logging_steps: int = Field(default=5, ge=1)
    save_steps: int = Field(default=25, ge=1)  # checkpoints under out_dir/checkpoints (resume)
    save_total_limit: int = Field(default=2, ge=1)
    # train only the top N decoder layers (null: all); the frozen trunk's features are computed once
    train_last_layers: int | None = Field(default=2, ge=1)
    precision: Precision = "auto"
    device: Device = "auto"
    # torch CPU threads (null: torch's default). 1 can be faster on a CPU shared with other jobs.
    threads: int | None = Field(default=None, ge=1)
    log_model: bool = False  # copy the final router (~540 MB) into MLflow on every retrain (opt-in)
    registered_model_name: str | None = None  # also register it under this name


class SftConfig(_TrainParams):
    """Supervised fine-tuning on train.jsonl (TRL SFTTrainer): each query's labels at every λ of the grid."""

    # a key of params `models` (converted by the `models` stage), a local folder, or a hub id;
    # the stage resolves it to the ``base_model_dir`` that run_sft receives
    base_model: str = "smollm2-135m"
    # high because only the top layers train, on cached trunk features
    learning_rate: float = Field(default=3e-4, gt=0)
    epochs: float = Field(default=2.0, gt=0)
    batch_size: int = Field(default=16, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    train_last_layers: int | None = Field(default=2, ge=1)
    # early exit: the router keeps its base model's first N decoder layers (null: all of them). It then
    # routes at about N / num_layers of the full model's cost; chosen on val (docs/router-training.md)
    router_layers: int | None = Field(default=None, ge=1)
    # hard: the label policy's argmax at each λ; soft: fit softmax(s·(p̂ − λ·ê)) at each λ
    # (calibrated logits in principle; lower held-out utility on the replay val split at s = 10)
    targets: Literal["soft", "hard"] = "hard"
    # The share of the train queries SFT fits is no key of its own: it is tournament.train_fraction (the train
    # queries with a full profile, drawn with tournament.seed); GRPO's partial feedback learns on the rest.


class GrpoConfig(_TrainParams):
    """GRPO from the SFT checkpoint (TRL GRPOTrainer): one-token actions, one prompt per (train query, λ)."""

    learning_rate: float = Field(default=1e-5, gt=0)
    max_steps: int = Field(default=200, ge=1)
    logging_steps: int = Field(default=10, ge=1)
    save_steps: int = Field(default=50, ge=1)
    train_last_layers: int | None = Field(default=2, ge=1)
    # λ values GRPO samples per prompt (null: router_data.lambdas); must lie inside that trained grid
    lambdas: tuple[float, ...] | None = None
    # expected_correctness: the outcome shrunk toward the task prior (lower variance than the 0/1
    # outcome, the quantity the SFT labels maximize); "correctness" rewards the realized outcome
    rewards: dict[str, float] = {"expected_correctness": 1.0, "energy_penalty": 1.0}
    # energy_penalty scales joules with the norm the labels used (router_spec.json: params energy_policy.norm)
    num_generations: int | None = Field(default=None, ge=2)  # null: the pool size (every candidate can be tried)
    prompts_per_step: int = Field(default=4, ge=1)  # completions per step = prompts x num_generations
    # < 1 keeps the sampled policy close to the argmax the router deploys
    temperature: float = Field(default=0.5, gt=0)
    beta: float = Field(default=0.0, ge=0)  # KL weight toward the SFT model (0: no reference model)
    # How advantages are scaled. "group" (TRL's default) divides by each group's reward std: on a query
    # every candidate answers, rewards differ only by λ·energy, so a tiny std turns energy noise into
    # full-size advantages. "batch" divides by the batch std, "none" does not scale (Dr. GRPO).
    scale_rewards: Literal["group", "batch", "none"] = "batch"
    # keep the SFT weights when GRPO lowers the mean held-out (val) utility; both are reported
    keep_best_on_val: bool = True
    # where a reward comes from (issue 19). profile: a lookup in the full profile of every train query;
    # replay: GRPO trains on the train queries SFT did not fit (tournament.train_fraction < 1) and
    # reads the outcome of each sampled candidate only (training.partial_feedback); live: as replay, but
    # a sampled pair in neither the tournament's shard store nor the live-pair cache is answered, graded and
    # metered now by the tournament's backend and written to that cache (tournament.live)
    reward_source: Literal["profile", "replay", "live"] = "profile"
    # replay and live: how many λ of the grid (seeded) each query is rolled out at. A pair revealed at one λ is
    # known at all (its outcome and joules do not depend on λ), but every extra λ samples more pairs
    replay_lambdas_per_query: int = Field(default=1, ge=1)

    @field_validator("lambdas")
    @classmethod
    def _grid(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        return None if value is None else _check_lambdas(value)

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


class BudgetConfig(StrictModel):
    """The budget curve (stage ``budget``, issue 19): router utility against the joules spent profiling its data.

    (a) SFT on a full tournament of ``fractions`` of each task's train queries; (b) for ``grpo_fractions``,
    SFT on that share then GRPO with partial feedback (k = ``num_generations`` candidates per query) on the
    rest. Fraction 1 is the reference every point's paired-bootstrap CI is taken against.
    """

    fractions: tuple[float, ...] = (0.5, 1.0)  # (a) points; 1.0 is always added (the reference)
    grpo_fractions: tuple[float, ...] = (0.5,)  # (b) points: each must be below 1 (GRPO needs unprofiled queries)
    # candidates GRPO tries per query; >= the pool size is allowed (sampled with replacement: the distinct
    # pairs revealed per query are <= k, often fewer)
    num_generations: int = Field(default=2, ge=2)
    max_steps: int | None = Field(default=None, ge=1)  # GRPO steps per (b) point (null: grpo.max_steps)
    bootstrap_samples: int = Field(default=2000, ge=100)  # paired bootstrap of each point vs SFT on every query
    seed: int = 0  # the bootstrap's

    @field_validator("fractions", "grpo_fractions")
    @classmethod
    def _shares(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        bad = [v for v in value if not 0 < v <= 1]
        if bad:
            raise ValueError(f"fractions of the train queries must lie in (0, 1], got {bad}")
        if len(set(value)) != len(value):
            raise ValueError(f"duplicate fraction in {list(value)}")
        return tuple(sorted(float(v) for v in value))

    @field_validator("grpo_fractions")
    @classmethod
    def _below_one(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(v >= 1 for v in value):
            raise ValueError(f"grpo_fractions must be below 1 (GRPO learns on the unprofiled rest), got {list(value)}")
        return value

    @property
    def points(self) -> list[float]:
        """The (a) fractions, 1.0 included, in increasing order."""
        return sorted({*self.fractions, *self.grpo_fractions, 1.0})
