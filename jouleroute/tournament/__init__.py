"""Stage `tournament`'s library: every candidate answers every query, metered, resumable.

``run.py`` plans the work into jobs and runs them (here or on Dask workers), ``shards.py`` keeps the
finished batches so a killed run resumes, ``summary.py`` condenses a profile into per-candidate figures.
"""

from jouleroute.tournament.config import TournamentConfig
from jouleroute.tournament.run import (JobRunner, ShardJob, TournamentInputs, TournamentPlan, finish_tournament,
                                       plan_tournament, run_job, run_tournament)

__all__ = ["JobRunner", "ShardJob", "TournamentConfig", "TournamentInputs", "TournamentPlan", "finish_tournament",
           "plan_tournament", "run_job", "run_tournament"]
