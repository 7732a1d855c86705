"""params.yaml section `tournament`."""

from __future__ import annotations

from pydantic import Field

from jouleroute.strict import StrictModel


class TournamentConfig(StrictModel):
    seed: int = 0
    warmup_batches: int = Field(default=1, ge=0, description="batches run before measuring, outside any window")
    splits: list[str] = Field(default_factory=lambda: ["train", "val", "test"])
    train_fraction: float = Field(
        default=1.0, gt=0, le=1, description="share of each task's train queries the tournament runs (drawn with "
        "`seed`, `sampling.profiled_ids`); every val and test query runs. Below 1 the others have no outcome: GRPO's "
        "live rollouts answer them (grpo.reward_source: live), and SFT fits the share run (sft.full_profile_fraction "
        "must equal it, sft.seed equal `seed`)")
    models_per_worker: int = Field(
        default=1, ge=1, description="models one process (the serial run, a Dask worker) keeps loaded at once; "
                                     "jobs come grouped by model, so 1 already loads each model once per worker")
    dask_address: str | None = Field(
        default=None, description="Dask scheduler the Prefect flow runs the shards on (`jouleroute-flow run`, "
                                  "docs/orchestration.md); `jouleroute tournament` and `dvc repro` ignore it")
