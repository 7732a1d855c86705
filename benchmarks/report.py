"""Render results/*.json as the markdown tables quoted in benchmarks/README.md.

    .venv/bin/python benchmarks/report.py [--readme | --check]

``--readme`` writes the tables into benchmarks/README.md and the set-up figures into README.md's setup-figures
block; ``--check`` writes nothing and exits 1 when either is not what results/*.json give.

The tables themselves: report_model_tables.py, report_serving_tables.py and report_run_tables.py, with the
lines they share in report_format.py; this file orders them and writes the READMEs' generated blocks.
"""

from __future__ import annotations

import sys

from _common import RESULTS
from report_model_tables import (batching, dask_tournament, gpu_check, loglik_levers, meter_nvml, meter_overhead,
                                 router_scoring)
from report_run_tables import end_to_end, setup_figures
from report_serving_tables import capture, cascade_gateway, faults, gateway_load, loop_run, reload


def all_tables() -> None:
    for path in sorted(RESULTS.glob("batching*.json")):
        batching(path.name)
    meter_overhead()
    for path in sorted(RESULTS.glob("router_scoring*.json")):
        router_scoring(path.name)
    gateway_load()
    cascade_gateway()
    loglik_levers()
    setup_figures()
    end_to_end("end_to_end.json", "`make run` stage by stage")
    end_to_end("study_end_to_end.json", "`make study` stage by stage")
    for path in sorted(RESULTS.glob("dask_tournament*.json")):
        dask_tournament(path.name)
    for path in sorted(RESULTS.glob("meter_nvml*.json")):
        meter_nvml(path.name)
    for path in sorted(RESULTS.glob("gpu_check*.json")):
        gpu_check(path.name)
    faults()
    capture()
    reload()
    loop_run()


def write_readme(check: bool = False) -> int:
    """Replace the generated block of benchmarks/README.md with the tables of results/*.json (and the set-up block
    of README.md). ``check``: write nothing; 1 when either block is not what the results give."""
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        all_tables()
    readme = RESULTS.parent / "README.md"
    text = readme.read_text()
    begin = text.index("<!-- report:begin")
    begin = text.index("\n", begin) + 1
    end = text.index("<!-- report:end -->")
    wanted = text[:begin] + "\n" + buffer.getvalue().strip() + "\n\n" + text[end:]
    stale = [readme.name] if wanted != text else []
    if not check:
        readme.write_text(wanted)
    stale += write_setup_block(check)
    if stale:
        print(f"out of date with benchmarks/results: {', '.join(stale)}; run `.venv/bin/python benchmarks/report.py "
              "--readme`" if check else f"wrote {', '.join(stale)}")
    return 1 if check and stale else 0


SETUP_BEGIN = "<!-- generated:setup-figures:begin (benchmarks/report.py) -->"
SETUP_END = "<!-- generated:setup-figures:end -->"


def write_setup_block(check: bool = False) -> list[str]:
    """The set-up figures into the top-level README.md, between its markers (only there: the rest is hand-written);
    ``["README.md"]`` when the block changed (``check``: would change)."""
    import contextlib
    import io

    readme = RESULTS.parents[1] / "README.md"
    text = readme.read_text()
    if SETUP_BEGIN not in text or SETUP_END not in text or not (RESULTS / "setup.json").is_file():
        print(f"README.md: no {SETUP_BEGIN} ... {SETUP_END} block, or no results/setup.json: left as it is")
        return []
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        setup_figures(heading=None)
    begin = text.index(SETUP_BEGIN) + len(SETUP_BEGIN)
    end = text.index(SETUP_END)
    wanted = text[:begin] + "\n" + buffer.getvalue().strip() + "\n" + text[end:]
    if wanted == text:
        return []
    if not check:
        readme.write_text(wanted)
    return ["README.md (setup-figures block)"]


if __name__ == "__main__":
    try:
        if sys.argv[1:] in (["--readme"], ["--check"]):
            sys.exit(write_readme(check=sys.argv[1] == "--check"))
        all_tables()
    except FileNotFoundError as error:
        print(f"(no results yet: {error.filename})\n")
