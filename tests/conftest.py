"""The two tiers of the suite, and what every tier shares.

Fast unit tests run in-process on tiny data (`make test-fast`, about 90 s on 2 cores). Integration
tests start real services or whole pipelines (DVC repositories and the CLI in subprocesses, Prefect
servers, Dask clusters, HTTP servers, a browser) or real systems that take seconds per test (an MLflow
store's migrations, a Great Expectations context, a TRL trainer). They are marked ``integration``
here, by where they live, so the tier is decided in one place; `make test` runs both tiers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Where the integration tests live, and what they start.
INTEGRATION = {
    "pipeline": "tiny repositories under real DVC, the CLI in subprocesses",
    "orchestration": "Prefect servers, Dask clusters, a browser on the Prefect UI",
    "gateway": "gateway and upstream HTTP servers on loopback",
    "served": "model servers and energy exporters in their own processes on loopback",
    "evaluation/test_mlflow_ui.py": "the MLflow UI server and a browser",
    "test_ui_ports.py": "`make ui-mlflow` serving on a port",
    "evaluation/test_mlflow.py": "a full evaluation logged to a real MLflow store",
    "tracking": "MLflow sqlite stores: created, migrated, copied",
    "validation": "Great Expectations contexts on real profiles",
    "training/test_sft_grpo.py": "TRL's SFT and GRPO trainers on a tiny model",
    "training/test_router_learns.py": "TRL training until the router learns",
}

# .ci/run sets this, so that CI fails where a developer's machine skips: never a silent skip in CI.
REQUIRE_BROWSER = "JOULEROUTE_REQUIRE_BROWSER"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: starts real services or pipelines (make test-fast skips it)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = Path(str(item.path)).resolve().relative_to(TESTS).as_posix()
        if any(where == place or where.startswith(place + "/") for place in INTEGRATION):
            item.add_marker(pytest.mark.integration)


# What the router tests train: wider than the pipeline's tiny model, with a tokenizer of their own corpus.
ROUTER_BASE = dict(vocab_size=400, hidden_size=32, intermediate_size=64, num_heads=4, kv_heads=2, max_positions=1024,
                   initializer_range=0.02)
ROUTER_PROMPT = "Energy weight: 0.25 Query: what is 2 + 2? Models: small, large. Reply with the id."


def tiny_router_base(folder: Path, corpus: list[str], **sizes) -> Path:
    """A base model for router training tests, from the one tiny-model builder (jouleroute/backends/tiny.py)."""
    from jouleroute.backends.tiny import build_tiny_llama

    return build_tiny_llama(folder, corpus=[*corpus, ROUTER_PROMPT], **{**ROUTER_BASE, **sizes})


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's headless Chromium: `make setup` installs it when it can (root with apt). Without it the browser
    tests skip with the reason, except under `.ci/run`, where a missing browser fails them."""
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found:
        return found
    reason = "headless Chromium is not installed: `make setup` installs Debian's chromium when run as root with apt"
    if os.environ.get(REQUIRE_BROWSER) == "1":
        pytest.fail(f"{reason} ({REQUIRE_BROWSER}=1: CI runs every browser test)")
    pytest.skip(reason)
