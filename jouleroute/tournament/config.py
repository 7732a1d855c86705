"""params.yaml section `tournament`."""

from __future__ import annotations

from pydantic import Field

from jouleroute.strict import StrictModel


class TournamentConfig(StrictModel):
    seed: int = 0
    warmup_batches: int = Field(default=1, ge=0, description="batches run before measuring, outside any window")
    splits: list[str] = Field(default_factory=lambda: ["train", "val", "test"])
    train_fraction: float = Field(
        default=1.0, gt=0, le=1, description="share of each task's train queries with a full profile, drawn with "
        "`seed` (`sampling.profiled_ids`): the one train-share key. The tournament runs only these (every val and "
        "test query runs) and SFT fits them; below 1 GRPO learns on the others with partial feedback (the "
        "tournament's: grpo.reward_source live; a profile of every pair from elsewhere: replay or live)")
    models_per_worker: int = Field(
        default=1, ge=1, description="models one process (the serial run, a Dask worker) keeps loaded at once; "
                                     "jobs come grouped by model, so 1 already loads each model once per worker")
    dask_address: str | None = Field(
        default=None, description="Dask scheduler the Prefect flow runs the shards on (`jouleroute-flow run`, "
                                  "docs/orchestration.md); `jouleroute tournament` and `dvc repro` ignore it")
