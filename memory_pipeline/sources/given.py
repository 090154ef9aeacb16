"""Sources named on the spot, not in a sources file: ``import`` and ``capture``.

Both build a ``SourcesConfig`` from the paths they are given (a folder is a root with
its kind's default patterns; a file is a root that picks only that file) and store
through the same ``apply_sync`` as a sync: one document per session, a session that
grew replaces the old one, a current one is skipped, and the ledger records what each
file produced and why one was refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from memory_pipeline.sources.ledger import Ledger
from memory_pipeline.sources.sources_file import (
    DEFAULT_EXCLUDE,
    DEFAULT_KNOWLEDGE_TYPE,
    DEFAULT_PATTERNS,
    SourceKind,
    SourceRoot,
    SourcesConfig,
    absolute,
)
from memory_pipeline.sources.sync import SyncPlan, SyncReport, SyncTarget, apply_sync


def given_root(name: str, kind: SourceKind, path: Path, space: str | None) -> SourceRoot:
    """A folder with ``kind``'s default patterns and excludes, or one file alone."""
    path = absolute(path)
    whole = path.is_dir()
    return SourceRoot(
        name=name,
        path=path if whole else path.parent,
        kind=kind,
        patterns=DEFAULT_PATTERNS[kind] if whole else (path.name,),
        exclude=DEFAULT_EXCLUDE[kind] if whole else (),
        knowledge_type=DEFAULT_KNOWLEDGE_TYPE[kind],
        importance=None,
        tags=(),
        space=space,
    )


def given_config(
    kind: SourceKind, paths: Sequence[Path], space: str | None, state_path: Path
) -> SourcesConfig:
    """The roots of ``paths`` (one each, in order: the first that picks a file wins)."""
    roots = tuple(given_root(f"given-{n}", kind, p, space) for n, p in enumerate(paths, 1))
    return SourcesConfig(file=state_path, roots=roots, state_path=state_path)


def session_kind(path: Path) -> SourceKind:
    """The source of a captured session log: a Codex CLI rollout by its name
    (``rollout-<time>-<id>.jsonl``, the Codex kind's own pattern), else Claude Code's."""
    name = Path(path).name
    if name.startswith("rollout-") and name.endswith(".jsonl"):
        return SourceKind.CODEX
    return SourceKind.CLAUDE_CODE


def store_files(
    target: SyncTarget, config: SourcesConfig, files: Sequence[Path], ledger: Ledger
) -> SyncReport:
    """Store ``files`` (each under a root of ``config``) and nothing else: a file that is
    gone is not a file to delete here, only one not to store."""
    plan = SyncPlan("paths", ingest=[str(absolute(f)) for f in files if Path(f).is_file()])
    return apply_sync(target, config, plan, ledger)
