"""``memory-pipeline forget`` and ``memory-pipeline restore``: thin adapters over MemorySystem."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast

from memory_pipeline.cli.flags import add_all_spaces, setting
from memory_pipeline.config import Settings
from memory_pipeline.memory.scoring import MemoryParams

if TYPE_CHECKING:
    from memory_pipeline.memory.forgetting import ForgettingReport, RestoreReport
    from memory_pipeline.system import MemorySystem


class _Forgetting(Protocol):
    """The MemorySystem wrappers these commands call.

    Weights left as None take the configured defaults (``Settings.memory_params``),
    as the MCP tools and the Dagster asset do.
    """

    settings: Settings

    def run_forgetting_batch(
        self,
        *,
        memory: MemoryParams | None = ...,
        score_threshold: float = ...,
        dry_run: bool = ...,
        max_fraction: float = ...,
        force: bool = ...,
        grace_days: float | None = ...,
    ) -> ForgettingReport: ...

    def restore_archived(
        self,
        *,
        run_id: str | None = ...,
        doc_id: str | None = ...,
        chunk_ids: list[int] | None = ...,
    ) -> RestoreReport: ...


def _print(report: ForgettingReport | RestoreReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        print(report.render())


def register(
    sub: argparse._SubParsersAction[Any],
    parents: list[argparse.ArgumentParser],
    make_system: Callable[[argparse.Namespace], MemorySystem],
) -> None:
    """Add the ``forget`` and ``restore`` subcommands to the main parser."""

    def system(args: argparse.Namespace) -> _Forgetting:
        return cast(_Forgetting, make_system(args))

    def cmd_forget(args: argparse.Namespace) -> int:
        memory = system(args)
        weights = memory.settings.memory_params(
            time_weight=args.time_weight,
            freq_weight=args.freq_weight,
            importance_threshold=args.importance_threshold,
        )
        report = memory.run_forgetting_batch(
            memory=weights,
            score_threshold=args.score_threshold,
            dry_run=not args.apply,
            max_fraction=args.max_fraction,
            force=args.force,
            grace_days=args.grace_days,
        )
        _print(report, args.json)
        return 0

    def cmd_restore(args: argparse.Namespace) -> int:
        report = system(args).restore_archived(
            run_id=args.run_id, doc_id=args.doc_id, chunk_ids=args.chunk_id
        )
        _print(report, args.json)
        return 0

    p = sub.add_parser(
        "forget",
        parents=parents,
        help="archive chunks that scored low on the memory axis (dry run by default)",
        description="Score every live chunk with the memory formula (relevance 0); chunks cut "
        "by importance or scoring below --score-threshold after their grace period (--grace-days) "
        "are candidates. Without --apply "
        "nothing changes; with it they go to the archive and can be brought back with restore.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--apply", dest="apply", action="store_true", help="archive and remove the candidates"
    )
    mode.add_argument(
        "--dry-run", dest="apply", action="store_false", help="only report (the default)"
    )
    p.add_argument(
        "--time-weight",
        type=float,
        help=f"weight of freshness (default: {setting('time_weight')})",
    )
    p.add_argument(
        "--freq-weight",
        type=float,
        help=f"weight of access frequency (default: {setting('freq_weight')})",
    )
    p.add_argument(
        "--importance-threshold",
        type=float,
        help="importance below this is cut; unset importance always passes "
        f"(default: {setting('importance_threshold')})",
    )
    p.add_argument(
        "--score-threshold",
        type=float,
        help=f"memory value below this is forgotten (default: {setting('score_threshold')})",
    )
    p.add_argument(
        "--max-fraction",
        type=float,
        help="refuse to archive more than this share of live chunks in one run "
        f"(default: {setting('max_fraction')})",
    )
    p.add_argument(
        "--grace-days",
        type=float,
        help="days after ingest or the last access in which no chunk is forgotten for its "
        f"score (default: {setting('grace_days')})",
    )
    p.add_argument("--force", action="store_true", help="archive even above --max-fraction")
    add_all_spaces(p, "score (and with --apply, archive) the chunks of")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=cmd_forget, apply=False)

    p = sub.add_parser(
        "restore", parents=parents, help="bring archived chunks back (with new chunk ids)"
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--run-id", help="every chunk a forgetting run archived")
    which.add_argument("--doc-id", help="every archived chunk of one document")
    which.add_argument(
        "--chunk-id", type=int, action="append", help="an archived chunk's old id (repeatable)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=cmd_restore)
