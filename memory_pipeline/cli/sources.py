"""``memory-pipeline sources status | sync``: the source roots from the command line.

``status`` lists every file under the roots with its ingest state (new /
ingested / changed / failed with the reason, and removed files whose documents
are still stored). ``sync`` does what the pipeline's ingest run does, without
Dagster: ingest new and changed files, delete the documents of removed ones,
then update the index.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from memory_pipeline.config import pipeline_variable
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.sources.ledger import open_ledger, read_ledger
from memory_pipeline.sources.sources_file import SourcesConfig, load_sources
from memory_pipeline.sources.status import FileStatus, missing_roots, sources_status
from memory_pipeline.sources.sync import apply_sync, plan_sync

SOURCES_ENV = pipeline_variable("sources_file")
MakeSystem = Callable[[argparse.Namespace], Any]


def sources_file(args: argparse.Namespace) -> SourcesConfig:
    path = args.sources or os.environ.get(SOURCES_ENV)
    if not path:
        raise InvalidInputError(
            f"no sources file: pass --sources FILE or set {SOURCES_ENV} (see docs/dagster.md)"
        )
    return load_sources(path)


def _shown(status: FileStatus, config: SourcesConfig) -> str:
    root = next((r for r in config.roots if r.name == status.root), None)
    rel = root.relative(status.path) if root else None
    return f"{status.root}/{rel}" if rel is not None else str(status.path)


def render_status(statuses: list[FileStatus], config: SourcesConfig) -> str:
    counts = Counter(s.state.value for s in statuses)
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    lines = [f"{len(statuses)} files under {len(config.roots)} roots ({summary or 'none'})"]
    lines += [f"  root {r.name}: folder {r.path} does not exist" for r in missing_roots(config)]
    rows = [[s.state.value, _shown(s, config), str(s.documents), s.reason] for s in statuses]
    if rows:
        from memory_pipeline.memory.health import render_table  # loads the store: only here

        lines += ["", render_table(["state", "file", "documents", "reason"], rows)]
    return "\n".join(lines)


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
    make_system: MakeSystem,
) -> None:
    """Add ``sources status`` and ``sources sync``; handlers return exit codes."""

    def cmd_status(args: argparse.Namespace) -> int:
        config = sources_file(args)
        system = make_system(args)
        statuses = sources_status(system.store, config, read_ledger(config.state_path))
        if args.json:
            rows = [{**asdict(s), "path": str(s.path)} for s in statuses]
            print(json.dumps(rows, ensure_ascii=False, indent=2, default=str))
        else:
            print(render_status(statuses, config))
        return 0

    def cmd_sync(args: argparse.Namespace) -> int:
        config = sources_file(args)
        system = make_system(args)
        paths = [str(Path(p)) for p in args.paths] or None
        with open_ledger(config.state_path) as ledger:
            plan = plan_sync(system.store, config, ledger, paths=paths)
            report = apply_sync(system, config, plan, ledger, actor="cli")
        print(
            f"{len(plan.ingest)} files to ingest, {len(plan.delete)} removed: "
            f"+{report.documents_added} new, {report.documents_replaced} replaced, "
            f"{report.documents_unchanged} unchanged, {report.sessions_skipped} sessions skipped, "
            f"-{report.documents_removed} deleted documents ({report.seconds:.1f}s)"
        )
        for path, reason in sorted(report.failed.items()):
            print(f"  failed  {path}: {reason}")
        for warning in report.warnings:
            print(f"  warning  {warning}")
        if not args.no_index:
            r = system.update_index()
            print(f"index version {r.version} ({r.kind}): +{r.added} -{r.removed}")
        return 1 if report.failed else 0

    p = sub.add_parser("sources", help="source roots: ingest state of every file, or sync them")
    actions = p.add_subparsers(dest="sources_command", required=True, metavar="ACTION")
    for name, helptext in (
        ("status", "list every file under the roots with its ingest state"),
        ("sync", "ingest new/changed files, delete removed ones, update the index"),
    ):
        a = actions.add_parser(name, parents=parents, help=helptext)
        a.add_argument("--sources", help=f"sources file (default: ${SOURCES_ENV})")
        if name == "status":
            a.add_argument("--json", action="store_true", help="machine-readable output")
            a.set_defaults(func=cmd_status)
        else:
            a.add_argument("paths", nargs="*", help="only these files (default: every root)")
            a.add_argument("--no-index", action="store_true", help="store only; index later")
            a.set_defaults(func=cmd_sync)
