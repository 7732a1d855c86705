"""Stage `tournament`'s library: every candidate answers every query, metered, resumable.

``jobs.py`` holds a run's inputs and the jobs it is cut into, ``run.py`` plans and runs them (here or on
Dask workers), ``lanes.py`` decides which of them may run at once (never two windows on one counter),
``loading.py`` keeps each loaded model for the rest of the run and meters loading apart from answering,
``shards.py`` keeps the finished batches so a killed run resumes, ``summary.py`` condenses a profile into
per-candidate figures.
"""

from jouleroute.tournament.config import TournamentConfig
from jouleroute.tournament.jobs import JobRunner, ShardJob, TournamentInputs, TournamentPlan
from jouleroute.tournament.loading import loaded_count, loading_summary, release_models
from jouleroute.tournament.run import finish_tournament, plan_tournament, run_job, run_tournament

__all__ = ["JobRunner", "ShardJob", "TournamentConfig", "TournamentInputs", "TournamentPlan", "finish_tournament",
           "loaded_count", "loading_summary", "plan_tournament", "release_models", "run_job", "run_tournament"]
