"""``memory-pipeline import KIND PATH…``: the history a user already has, into the memory.

Files or folders of one source kind (any kind with a reader: ``sources.status.READERS``)
are stored through the same sync as a sources file's roots (``sources.given``), one file
at a time under the import ledger: a session already stored is skipped, a grown one
replaces the old, so an import stopped by Ctrl-C or a kill continues where it was when
run again, and nothing is stored twice. A progress bar with an ETA goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.locations import import_state
from memory_pipeline.sources.given import given_config, store_files
from memory_pipeline.sources.ledger import Ledger, open_ledger
from memory_pipeline.sources.projects import AUTO, WITH_FOLDER, session_project
from memory_pipeline.sources.sources_file import SourceKind, SourcesConfig, absolute
from memory_pipeline.sources.status import READERS, scan
from memory_pipeline.sources.sync import SyncReport

#: What a shell reports for a command Ctrl-C ended: 128 + SIGINT.
INTERRUPTED = 130


@contextmanager
def stopping() -> Iterator[list[bool]]:
    """Ctrl-C asks to stop after the file being stored (a list that is true once asked);
    a second Ctrl-C stops at once, as usual. Storing a file is never cut in half by the
    first: its session is stored whole or not at all either way, but the ledger and the
    summary then tell how far the import got."""
    asked: list[bool] = []

    def ask(signum: int, frame: object) -> None:
        asked.append(True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("\nstopping after this file (Ctrl-C again stops at once)", file=sys.stderr)

    previous = signal.signal(signal.SIGINT, ask)
    try:
        yield asked
    finally:
        signal.signal(signal.SIGINT, previous)


def files_to_import(config: SourcesConfig, paths: list[Path]) -> list[Path]:
    """The files given, and those the kind's patterns pick under the folders given."""
    folders = [r for r, p in zip(config.roots, paths, strict=True) if p.is_dir()]
    found = [f.path for f in scan(dataclasses.replace(config, roots=tuple(folders)))]
    given = [absolute(p) for p in paths if p.is_file()]
    return list(dict.fromkeys([*given, *found]))


def summary(report: SyncReport, done: int, total: int) -> list[str]:
    stored = report.documents_added + report.documents_replaced
    lines = [
        f"{done} of {total} files: {stored} sessions stored ({report.documents_added} new, "
        f"{report.documents_replaced} grown), {report.turns_stored} turns, "
        f"{report.sessions_skipped} sessions already stored (skipped), "
        f"{len(report.failed)} files refused"
    ]
    lines += [f"  refused  {path}: {why}" for path, why in sorted(report.failed.items())]
    return lines


def store_auto(
    system: Any, kind: SourceKind, path: Path, state: Path, ledger: Ledger, spaces: Counter[str]
) -> SyncReport:
    """Store one session file in the space of the project it was worked in (``--space
    auto``); one that names no folder is refused, nothing of it stored."""
    from memory_pipeline.store.rows import now_utc

    project = session_project(path)
    if project is None:
        report = SyncReport()
        report.failed[str(absolute(path))] = (
            f"it names no working folder, so --space {AUTO} cannot tell its project; "
            "import it with --space NAME"
        )
        return report
    config = given_config(kind, [path], project.name, state)
    report = store_files(system, config, [path], ledger)
    if not report.failed:
        spaces[project.name] += 1
        system.store.note_capture(project.name, str(project.root), now_utc())
    return report


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
    make_system: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``import``."""

    def cmd_import(args: argparse.Namespace) -> int:
        kind = SourceKind(args.kind)
        paths = [Path(p).expanduser() for p in args.paths]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise InvalidInputError(f"PATH {', '.join(missing)}: no such file or folder")
        auto = args.space == AUTO
        if auto and kind not in WITH_FOLDER:
            raise InvalidInputError(
                f"--space {AUTO} takes each session's space from the folder it was worked "
                f"in, which only {' and '.join(k.value for k in WITH_FOLDER)} histories "
                "hold; give --space NAME"
            )
        system = make_system(args)
        state = import_state(system.settings.db_path)
        config = given_config(kind, paths, None, state)
        files = files_to_import(config, paths)
        spaces: Counter[str] = Counter()
        sizes = {f: f.stat().st_size for f in files}
        from tqdm import tqdm

        report = SyncReport()
        done = 0
        bar = tqdm(
            total=sum(sizes.values()),
            unit="B",
            unit_scale=True,
            desc=f"import {kind.value}",
            file=sys.stderr,
            disable=args.no_progress,
            mininterval=1.0,
        )
        with stopping() as stop, open_ledger(state) as ledger:
            for path in files:
                if stop:
                    break
                if auto:
                    report.add(store_auto(system, kind, path, state, ledger, spaces))
                else:
                    report.add(store_files(system, config, [path], ledger))
                done += 1
                bar.update(sizes[path])
                bar.set_postfix(
                    sessions=report.documents_added + report.documents_replaced,
                    turns=report.turns_stored,
                    refresh=False,
                )
        bar.close()
        if stop:
            for line in summary(report, done, len(files)):
                print(line)
            print(
                f"interrupted after {done} of {len(files)} files: what is listed above is "
                "stored; run the same command again to continue (stored sessions are "
                "skipped, none is stored twice)",
                file=sys.stderr,
            )
            return INTERRUPTED
        for line in summary(report, done, len(files)):
            print(line)
        if spaces:
            print(
                "files by space: " + ", ".join(f"{n} in {sp}" for sp, n in sorted(spaces.items()))
            )
        if not args.no_index and system.index_due():
            try:
                r = system.update_index()
            except KeyboardInterrupt:  # the store holds every session: only search waits
                print(
                    "interrupted while updating the index: every session listed above is "
                    "stored; run memory-pipeline update-index (or the next import or "
                    "capture does it) to make them searchable",
                    file=sys.stderr,
                )
                return INTERRUPTED
            print(f"index version {r.version} ({r.kind}): +{r.added} -{r.removed}")
        return 1 if report.failed else 0

    p = sub.add_parser(
        "import",
        parents=parents,
        help="import conversation history (files or folders of one kind); resumable",
        description="Store the conversations under PATH… (files, or folders walked with the "
        "kind's default patterns) in --space, one document per session; --space auto puts "
        "each Claude Code or Codex session in the space of the project it was worked in (as "
        "the capture hook does), so a whole history keeps its projects apart. Stopped by Ctrl-C "
        "or a kill, the same command continues; sessions already stored are skipped.",
    )
    p.add_argument("kind", choices=sorted(k.value for k in READERS), help="the source kind")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or folders")
    p.add_argument("--no-index", action="store_true", help="store only; run update-index later")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=cmd_import)
