"""The baseline routers in one import: ``from jouleroute.routing.baselines import KNNRouter, ...``.

Each lives in its own module (simple.py, knn.py, mlp.py, mf.py); see docs/baselines.md.
"""

from jouleroute.routing.knn import KNNRouter
from jouleroute.routing.learned import LearnedRouter
from jouleroute.routing.mf import MFRouter
from jouleroute.routing.mlp import MLPRouter
from jouleroute.routing.registry import ROUTER_FAMILIES, baseline_names, build_router
from jouleroute.routing.scoring import ScoredQueries, normalize_energy
from jouleroute.routing.simple import AlwaysRouter, OracleRouter, RandomRouter, mix_of

__all__ = [
    "AlwaysRouter",
    "KNNRouter",
    "LearnedRouter",
    "MFRouter",
    "MLPRouter",
    "OracleRouter",
    "RandomRouter",
    "ROUTER_FAMILIES",
    "ScoredQueries",
    "baseline_names",
    "build_router",
    "mix_of",
    "normalize_energy",
]
