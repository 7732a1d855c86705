"""The chain file: the chosen chain as an artifact the gateway serves, like the champion.

Exactly these keys (an unknown or missing key is an error, so a typo never serves a different chain)::

    {
      "stages": [["cand_a", "cand_b"], ["cand_c"]],   # candidate ids per stage, asked in order
      "max_output_tokens": 512,                        # int or null: a one-member non-final stage accepts
                                                       #   only an output shorter than this
      "chosen_by": "above_best",                       # the target's name (evaluate.cascade.targets)
      "selection": {...}                               # its figures on the selection queries (search.py)
    }

The acceptance rule the file implies is chain.py's: a non-final stage of several members accepts when two
agree, one of one member when its answer was extracted (and shorter than the bound); the last stage answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from jouleroute.atomic import atomic_write_text
from jouleroute.cascade.chain import Chain

KEYS = ("stages", "max_output_tokens", "chosen_by", "selection")


@dataclass(frozen=True)
class ChainArtifact:
    """A chain with what chose it (the target kind) and its selection figures."""

    chain: Chain
    chosen_by: str
    selection: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"stages": [list(s) for s in self.chain.stages],
                           "max_output_tokens": self.chain.max_output_tokens, "chosen_by": self.chosen_by,
                           "selection": self.selection}, indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = "chain file") -> "ChainArtifact":
        """Parse a chain file; errors name ``where`` and the field."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where}: not JSON ({err})") from err
        if not isinstance(data, dict) or set(data) != set(KEYS):
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"{where}: expected exactly the keys {list(KEYS)}, got {got}")
        stages = data["stages"]
        if not isinstance(stages, list) or not all(isinstance(s, list) and all(isinstance(c, str) for c in s)
                                                   for s in stages):
            raise ValueError(f"{where}: field 'stages' must be a list of lists of candidate ids, got {stages!r}")
        bound = data["max_output_tokens"]
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
            raise ValueError(f"{where}: field 'max_output_tokens' must be an integer or null, got {bound!r}")
        if not isinstance(data["chosen_by"], str) or not isinstance(data["selection"], dict):
            raise ValueError(f"{where}: field 'chosen_by' must be a string and 'selection' an object")
        try:
            chain = Chain(tuple(tuple(s) for s in stages), bound)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from err
        return cls(chain, data["chosen_by"], data["selection"])

    def write(self, path: Path) -> None:
        atomic_write_text(Path(path), self.to_json())

    @classmethod
    def read(cls, path: Path) -> "ChainArtifact":
        return cls.from_json(Path(path).read_text(), str(path))
