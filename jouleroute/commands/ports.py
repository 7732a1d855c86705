"""The ports the UIs were started on, so `jouleroute where` prints links that work.

`make ui-mlflow PORT=5050`, `make ui-prefect PORT=...` and `make prefect-server PORT=...` (through
`jouleroute-flow server start --port`) record the port before they start the UI, in
``artifacts/ui-ports.json`` (beside the results; `make clean` drops it). `where` prints the recorded
port, else the default. For Prefect an exported ``PREFECT_API_URL`` names the server the flows talk
to, so it wins over both.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from urllib.parse import urlparse

DEFAULTS = {"mlflow": 5000, "prefect": 4200}
RECORD = Path("artifacts/ui-ports.json")


def check_port(text: str | int, ui: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 1 <= port <= 65535:
        raise ValueError(f"PORT={text!r} for the {ui} UI: give a port number between 1 and 65535, e.g. PORT=5050")
    return port


def record(root: Path, ui: str, port: int) -> None:
    path = root / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    known = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps(known | {ui: port}, indent=2) + "\n")


def ui_port(root: Path, ui: str) -> tuple[int, str]:
    """The port and where it came from: ``PREFECT_API_URL``, the recorded start, or the default."""
    api = os.environ.get("PREFECT_API_URL") if ui == "prefect" else None
    if api and urlparse(api).port:
        return urlparse(api).port, "PREFECT_API_URL"
    path = root / RECORD
    try:
        return int(json.loads(path.read_text())[ui]), f"from the last `make {_target(ui)}`"
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULTS[ui], "default"


def _target(ui: str) -> str:
    return "ui-mlflow" if ui == "mlflow" else "ui-prefect / prefect-server"


def main(argv: list[str]) -> int:
    """``python -m jouleroute.commands.ports UI PORT``: check and record (the Makefile's UI targets)."""
    ui, text = argv
    try:
        record(Path.cwd(), ui, check_port(text, ui))
    except ValueError as error:
        print(f"make: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
