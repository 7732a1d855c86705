"""The kinds of policy a user deploys, each registered once: its name, the settings a deployed policy of that kind
carries (champion.json's ``deployed``, written by the evaluate stage) and the phrase that describes it.

- ``single``: one model answers every query (``model``);
- ``route``: a router family at an operating point (``family``, ``lam``), its fitted parts beside champion.json;
- ``cascade``: a chain of stages that escalates on disagreement (``stages``, ``max_output_tokens``), its chain file
  beside champion.json.

``deployed_policy`` checks a record against its kind; the gateway serves each kind through its own entry of one
table keyed by these names (gateway/build.py ``SERVE``), and a test holds the two tables to the same kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from jouleroute.policy.choose import CASCADE, ROUTE, SINGLE


@dataclass(frozen=True)
class PolicyKind:
    name: str
    settings: tuple[str, ...]  # the keys its deployed record must carry besides kind and name
    describe: Callable[[dict], str]


KINDS: dict[str, PolicyKind] = {}


def register_kind(kind: PolicyKind) -> PolicyKind:
    if kind.name in KINDS:
        raise ValueError(f"policy kind {kind.name!r} is registered twice")
    KINDS[kind.name] = kind
    return kind


register_kind(PolicyKind(SINGLE, ("model",), lambda d: f"always {d['model']}"))
register_kind(PolicyKind(ROUTE, ("family", "lam"), lambda d: f"{d['name']} at λ={d['lam']:.4g}"))
register_kind(PolicyKind(CASCADE, ("stages", "max_output_tokens"), lambda d: f"the cascade {d['name']}"))


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
