"""`memory-pipeline health | stats | duplicates`: read-only reports on the command line.

Thin adapters: each handler asks the MemorySystem for a report and prints it
(a table, or JSON with ``--json``). ``health`` exits 1 when something is wrong,
so schedules and shell scripts can act on it.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memory_pipeline.cli.flags import add_all_spaces, positive_int
from memory_pipeline.cli.sources import SOURCES_ENV
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.sources.ledger import read_ledger
from memory_pipeline.sources.sources_file import load_sources
from memory_pipeline.sources.status import describe_not_ingested, not_ingested

if TYPE_CHECKING:
    from memory_pipeline.memory.duplicates import DuplicateReport
    from memory_pipeline.memory.health import HealthReport
    from memory_pipeline.memory.stats import SystemStats
    from memory_pipeline.sources.status import StoreView

EXIT_OK = 0
EXIT_UNHEALTHY = 1


class Reports(Protocol):
    """The part of MemorySystem these commands use (its thin wrappers over the report functions)."""

    def index_health(self) -> HealthReport: ...

    def system_stats(self) -> SystemStats: ...

    def duplicate_audit(self, *, threshold: float, max_pairs: int) -> DuplicateReport: ...

    @property
    def store(self) -> StoreView: ...


MakeSystem = Callable[[argparse.Namespace], Reports]


def _print_json(data: dict[str, Any]) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def _unit_interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from exc
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {value}")
    return value


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
    make_system: MakeSystem,
) -> None:
    """Add the ``health``, ``stats`` and ``duplicates`` subcommands; handlers return exit codes."""

    def cmd_health(args: argparse.Namespace) -> int:
        system = make_system(args)
        report = system.index_health()
        sources = args.sources or os.environ.get(SOURCES_ENV)
        behind: list[str] | None = None
        if sources:  # the source files the store should hold, as the Dagster check sees them
            config = load_sources(sources)
            statuses = not_ingested(system.store, config, read_ledger(config.state_path))
            behind = describe_not_ingested(statuses)
        if args.json:
            data = report.to_dict()
            if behind is not None:
                data["sources"] = {"sources_file": str(sources), "not_ingested": behind}
            _print_json(data)
        else:
            print(report.render())
            if behind:
                print(f"\nsources: {len(behind)} files under the roots are not in the store")
                print("\n".join(f"  {line}" for line in behind))
                print("  (memory-pipeline sources sync ingests them)")
            elif behind is not None:
                print("\nsources: every file under the roots is in the store")
        healthy = report.healthy and not behind
        return EXIT_OK if healthy else EXIT_UNHEALTHY

    def cmd_stats(args: argparse.Namespace) -> int:
        stats = make_system(args).system_stats()
        if args.json:
            _print_json(stats.to_dict())
        else:
            print(stats.render())
        return EXIT_OK

    def cmd_duplicates(args: argparse.Namespace) -> int:
        report = make_system(args).duplicate_audit(
            threshold=args.threshold, max_pairs=args.max_pairs
        )
        if args.output:
            path = Path(args.output)
            try:
                path.write_text(
                    json.dumps(report.to_dict(), ensure_ascii=False, indent=2, default=str) + "\n",
                    encoding="utf-8",
                )
            except OSError as exc:
                raise InvalidInputError(f"cannot write the report to {path}: {exc}") from exc
        if args.json:
            _print_json(report.to_dict())
        else:
            print(report.render())
            if args.output:
                print(f"\nreport written to {args.output}")
        return EXIT_OK

    p = sub.add_parser(
        "health",
        parents=parents,
        help="check index ↔ database consistency, vectors, model ids, archive (exit 1 if unhealthy)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--sources",
        help=f"also check that every file under this sources file's roots is in the store "
        f"(default: {SOURCES_ENV} when set)",
    )
    p.set_defaults(func=cmd_health, reads_only=True)

    p = sub.add_parser("stats", parents=parents, help="counts, coverage, access, index and models")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_all_spaces(p, "count")
    p.set_defaults(func=cmd_stats, reads_only=True)

    p = sub.add_parser(
        "duplicates",
        parents=parents,
        help="identical documents and near-identical chunk pairs (reports only, never deletes)",
    )
    add_all_spaces(p, "compare across")
    p.add_argument(
        "--threshold",
        type=_unit_interval,
        default=0.95,
        help="cosine at or above which two chunks count as near-duplicates (default %(default)s)",
    )
    p.add_argument(
        "--max-pairs",
        type=positive_int,
        default=1000,
        help="keep the strongest N pairs (default %(default)s)",
    )
    p.add_argument("--output", metavar="REPORT.json", help="also write the report as JSON here")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_duplicates, reads_only=True)
