"""Energy meters (Zeus NVML/RAPL, labelled CPU-time estimate, replay) and batch-window attribution."""

from jouleroute.energy.attribution import ATTRIBUTION_RULE, attribute_window, attribution_rule, token_shares
from jouleroute.energy.base import Measurement, Meter
from jouleroute.energy.config import EnergyConfig, EnergyPolicy
from jouleroute.energy.estimate import EstimateMeter
from jouleroute.energy.factory import make_meter, nvml_usable, rapl_usable
from jouleroute.energy.replay import ReplayMeter
from jouleroute.energy.zeus_meter import MeterUnavailableError, ZeusMeter

__all__ = [
    "ATTRIBUTION_RULE",
    "EnergyConfig",
    "EnergyPolicy",
    "EstimateMeter",
    "Measurement",
    "Meter",
    "MeterUnavailableError",
    "ReplayMeter",
    "ZeusMeter",
    "attribute_window",
    "attribution_rule",
    "make_meter",
    "nvml_usable",
    "rapl_usable",
    "token_shares",
]
