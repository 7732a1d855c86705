"""A served policy's version (``X-Jouleroute-Policy-Version``, ``/readyz``): what the gateway reports and the loop
records for a champion folder. Light: the loop imports it without the gateway."""

from __future__ import annotations

import hashlib
import json

# Where a copy of a policy lives and what traffic it learned from (loop/serving.py stamps both when it promotes a
# candidate): provenance, not what the policy decides, so not part of its version.
WHERE_AND_WHENCE = ("model_dir", "trained_on")


def record_version(raw: bytes) -> str:
    """A deployed policy's version: its kind and the head of the sha256 of its champion.json without
    ``WHERE_AND_WHENCE`` (the record names its evaluate run, so two evaluations never share one), so the candidate
    the loop's gate compares and the copy it promotes carry the same version."""
    record = json.loads(raw)
    kind = (record.get("deployed") or {}).get("kind", "route")
    decides = json.dumps({k: v for k, v in record.items() if k not in WHERE_AND_WHENCE}, sort_keys=True)
    return f"{kind}:{hashlib.sha256(decides.encode()).hexdigest()[:12]}"
