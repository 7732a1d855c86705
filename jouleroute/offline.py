"""Offline by default: no hub downloads, no telemetry. Users who are online can override any of these.

``JOULEROUTE_ONLINE=1`` is the one switch for the Hugging Face Hub (``prepare.source: hf``, docs/tasks.md): the
three ``*_OFFLINE`` variables are then set to 0, whatever a shell or the Makefile exported; telemetry stays off.
"""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DVC_NO_ANALYTICS": "1",
    "GX_ANALYTICS_ENABLED": "false",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


HUB_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


def online() -> bool:
    """The user asked for the Hub: ``JOULEROUTE_ONLINE=1``."""
    return os.environ.get("JOULEROUTE_ONLINE", "").strip().lower() in ("1", "true", "yes")


def set_offline_defaults() -> None:
    """Set each variable unless the user already chose a value; with ``JOULEROUTE_ONLINE=1`` the Hub is reachable."""
    for key, value in OFFLINE_DEFAULTS.items():
        if key in HUB_OFFLINE and online():
            os.environ[key] = "0"
        else:
            os.environ.setdefault(key, value)
