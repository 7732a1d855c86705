"""The README and docs/ stay complete and their figures generated (read, never run: instant)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_generated_figures_are_what_their_sources_give():
    """scripts/doc_figures.py --check: a block whose source is here (dvc.yaml, the code, a run's outputs)
    must match it; one whose run has not happened on this machine is named and left alone."""
    done = subprocess.run([sys.executable, str(REPO / "scripts/doc_figures.py"), "--check"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_every_doc_is_linked_from_the_readme():
    missing = [p.name for p in sorted((REPO / "docs").glob("*.md")) if f"docs/{p.name}" not in README]
    assert missing == []


def test_the_layout_names_every_part_of_the_library():
    layout = README[README.index("## Layout"):]
    layout = layout[:layout.index("```", layout.index("```") + 3)]
    parts = [p.name + ("/" if p.is_dir() else "") for p in sorted((REPO / "jouleroute").iterdir())
             if (p.suffix == ".py" or (p / "__init__.py").exists()) and not p.name.startswith("__")]
    assert [p for p in parts if not re.search(rf"^\s+{re.escape(p)}\s", layout, re.M)] == []


def test_the_metrics_are_defined_where_the_readme_first_shows_them():
    first_use = README.index("AIQ")
    definitions = README[first_use:first_use + 3000]
    for term in ("**AIQ**", "**PGR**", r"**λ\***", "**λ**"):
        assert term in definitions, term
