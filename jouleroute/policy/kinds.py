"""The kinds of policy a user deploys, each registered once: what a deployed policy of that kind carries
(champion.json's ``deployed``, written by the evaluate stage), how it answers the test split, what it writes beside
champion.json, and the phrases that name it.

- ``single``: one model answers every query (``model``);
- ``route``: a router family at an operating point (``family``, ``lam``), its fitted parts beside champion.json;
- ``cascade``: a chain of stages that escalates on disagreement (``stages``, ``max_output_tokens``), its chain file
  (``DEPLOYED_CHAIN``) beside champion.json; it picks no one model per query: its outcomes are its chain simulated
  on the profile (evaluation/outcomes.py ``cascade_outcome``, the loop's gate likewise).

A ``deployment`` (evaluation/deployment.py) names the kind in ``policy``, the single model in ``single`` and the
policy in ``deployed``; evaluate's ``deployed`` metrics name them ``single``, ``champion`` and ``deployed_name``.
``deployed_policy`` checks a record against its kind; the gateway serves each kind through its own entry of one
table keyed by these names (gateway/build.py ``SERVE``), and a test holds the two tables to the same kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from jouleroute.policy.choose import CASCADE, ROUTE, SINGLE

DEPLOYED_CHAIN = "chain.json"  # a deployed cascade's chain file, beside champion.json (gateway/build.py reads it)


@dataclass(frozen=True)
class PolicyKind:
    name: str
    settings: tuple[str, ...]  # the keys its deployed record must carry besides kind and name
    describe: Callable[[dict], str]  # a deployed record's phrase
    compact: Callable[[dict], str]  # its name in the compact headline (`dvc metrics show`), from the metrics
    # per test query, from the champion router's picks at the deployed λ; None: its chain is simulated instead
    picks: Callable[[dict, list[str]], list[str]] | None
    serves: Callable[[dict], str | None]  # the report's sentence on what answers every query (None: its picks)
    write: Callable[[dict, Path], None] | None = None  # what it needs beside champion.json, from its deployment
    routes: bool = False  # the champion router at an operating point (a λ): its own picks, its cost metered
    tag: Callable[[dict], str] | None = None  # its own name on the registered champion (MLflow tag named the kind)
    # the report's words on why it is deployed, against the single the target picks alone (evaluate's block)
    verdict: Callable[[dict], str] = lambda block: ""


KINDS: dict[str, PolicyKind] = {}


def register_kind(kind: PolicyKind) -> PolicyKind:
    if kind.name in KINDS:
        raise ValueError(f"policy kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind
    return kind


def write_chain(deployment: dict, folder: Path) -> None:
    """The deployed cascade's chain file (cascade/artifact.py): what `jouleroute serve` runs with no options."""
    from jouleroute.cascade.artifact import ChainArtifact
    from jouleroute.cascade.chain import Chain

    deployed = deployment["deployed"]
    chain = Chain(tuple(tuple(s) for s in deployed["stages"]), deployed["max_output_tokens"])
    ChainArtifact(chain, "deployed", deployed.get("selection") or {}).write(folder / DEPLOYED_CHAIN)


register_kind(PolicyKind(
    SINGLE, ("model",), lambda d: f"always {d['model']}", compact=lambda dep: dep["single"],
    picks=lambda deployment, routed: [deployment["single"]] * len(routed),
    serves=lambda deployment: f"routing not deployed: {deployment['single']} serves every query (no route or "
                              "cascade paid on selection data)", tag=lambda deployment: deployment["single"],
    verdict=lambda block: ("does not beat it, or misses the target, and no cascade does: **that single model is "
                           "deployed**, every query sent to it, no router run")))
register_kind(PolicyKind(
    ROUTE, ("family", "lam"), lambda d: f"{d['name']} at λ={d['lam']:.4g}", compact=lambda dep: dep["champion"],
    picks=lambda deployment, routed: list(routed), serves=lambda deployment: None, routes=True,
    verdict=lambda block: "beats it: **routing is deployed**"))
register_kind(PolicyKind(
    CASCADE, ("stages", "max_output_tokens"), lambda d: f"the cascade {d['name']}",
    compact=lambda dep: (dep.get("deployed_name") or "").replace(" ", ""), picks=None,
    serves=lambda deployment: None, write=write_chain,  # the paired verdict over the reference single, as a route's
    tag=lambda deployment: deployment["deployed"]["name"],
    verdict=lambda block: f"is passed over: **the cascade `{block['deployed']['name']}` is deployed**, the cheapest "
                          "policy that meets the target on selection data (its rule scored out of fold), and it pays "
                          "over that single"))


def kind_of(deployment: dict) -> PolicyKind:
    """The registered kind of a deployment or of evaluate's ``deployed`` metrics (``policy``; a route by default)."""
    return KINDS[deployment.get("policy", ROUTE)]


def deployed_policy(record: dict, where: str) -> dict:
    """champion.json's ``deployed`` checked against its kind: one line naming the file when it is not one."""
    deployed = record.get("deployed")
    if not isinstance(deployed, dict) or deployed.get("kind") not in KINDS:
        got = deployed.get("kind") if isinstance(deployed, dict) else deployed
        raise ValueError(f"{where}: 'deployed' names no policy kind (got {got!r}; kinds: {', '.join(KINDS)}); rerun "
                         "`dvc repro evaluate`")
    missing = [k for k in ("name", *KINDS[deployed["kind"]].settings) if k not in deployed]
    if missing:
        raise ValueError(f"{where}: the deployed {deployed['kind']} policy lacks {missing}; rerun `dvc repro evaluate`")
    return deployed


def describe(deployed: dict) -> str:
    return KINDS[deployed["kind"]].describe(deployed)
