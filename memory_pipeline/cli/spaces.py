"""``memory-pipeline spaces``: every space of the memory, the project roots it serves, and
which one this folder's project writes to; ``--merge OLD NEW`` moves one space into another.

Listing opens only the store, read-only: no model, no index. A merge is a dry run unless
``--apply`` (``memory.space_merge``: one document per transaction, so a kill loses
nothing and the same command finishes the job; a finished merge run again changes nothing). A space whose sessions came
from two project roots is two projects sharing one memory, and is said so; a space
with documents and no root was filled before roots were kept (by ``import``, ``ingest``
or a capture of an older version).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_pipeline.config import Settings
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.spaces import ProjectSpace, Spaces, check_space, project_space

if TYPE_CHECKING:
    from memory_pipeline.store.space_roots import SpaceSummary

MakeSettings = Callable[[argparse.Namespace], Settings]
MakeSystem = Callable[[argparse.Namespace], Any]


def _when(moment: dt.datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


def summaries(settings: Settings) -> list[SpaceSummary]:
    """Every space of the memory ``settings`` names (none when it does not exist yet)."""
    from memory_pipeline.store import Store
    from memory_pipeline.store.urls import sqlite_file

    db_file = sqlite_file(settings.url)
    if db_file is not None and not db_file.exists():
        return []
    store = Store(settings.url, spaces=Spaces.everything(), read_only=True)
    try:
        return store.space_summaries()
    finally:
        store.close()


def render(rows: Sequence[SpaceSummary], here: ProjectSpace) -> list[str]:
    """The table, then what this folder's project writes to and what to look at."""
    if not rows:
        lines = ["no space holds anything yet"]
    else:
        width = max(len("space"), *(len(r.space) for r in rows))
        lines = [f"{'space':<{width}}  {'documents':>9}  {'chunks':>7}  {'last stored':<16}  roots"]
        for r in rows:
            roots = "; ".join(f"{root} (captured {_when(at)})" for root, at in r.roots)
            mark = "  ← this project" if r.space == here.name else ""
            lines.append(
                f"{r.space:<{width}}  {r.documents:>9}  {r.chunks:>7}  "
                f"{_when(r.last_stored):<16}  {roots or '-'}{mark}"
            )
    lines.append("")
    lines.append(f"this folder's project: {here.root} → space {here.name!r} ({here.how})")
    for r in rows:
        if len(r.roots) > 1:
            lines.append(
                f"warning: space {r.space!r} holds sessions of {len(r.roots)} project roots, "
                "which share its memory; give each its own with setup claude-code in each root "
                "(and spaces --merge for what is already stored)"
            )
    return lines


def as_json(rows: Sequence[SpaceSummary], here: ProjectSpace) -> dict[str, Any]:
    return {
        "spaces": [
            {
                "space": r.space,
                "documents": r.documents,
                "chunks": r.chunks,
                "last_stored": r.last_stored.isoformat() if r.last_stored else None,
                "roots": [{"root": root, "last_capture": at.isoformat()} for root, at in r.roots],
            }
            for r in rows
        ],
        "this_project": {"space": here.name, "root": str(here.root), "how": here.how},
    }


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
    make_settings: MakeSettings,
    make_system: MakeSystem,
) -> None:
    """Add ``spaces``."""

    def cmd_spaces(args: argparse.Namespace) -> int:
        if args.merge:
            args.reads_only = not args.apply  # a dry run opens the memory read-only
            return merge(make_system(args), *args.merge, apply=args.apply, progress=args.progress)
        if args.apply:
            raise InvalidInputError("--apply goes with --merge OLD NEW")
        here = project_space(Path.cwd())
        rows = summaries(make_settings(args))
        if args.json:
            print(json.dumps(as_json(rows, here), ensure_ascii=False, indent=2))
        else:
            print("\n".join(render(rows, here)))
        return 0

    p = sub.add_parser(
        "spaces",
        parents=parents,
        help="list every memory space: its documents, chunks, project roots, last capture",
        description="List every space of the memory with what it holds, when something was "
        "last stored in it and the project roots whose sessions were captured into it, and "
        "say which space this folder's project writes to (the one its .mcp.json names, else "
        "its repository root's name and a mark of the root's path). Reads only, unless "
        "--merge OLD NEW --apply moves one space into another (a folder-name space of an "
        "older setup into the project's own, say).",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--merge",
        nargs=2,
        metavar=("OLD", "NEW"),
        type=check_space_arg,
        help="move every document of space OLD (its chunks, tags, vectors, forgotten chunks "
        "and redaction counts) into space NEW, then update the index; a dry run that only "
        "says what would move unless --apply",
    )
    p.add_argument("--apply", action="store_true", help="with --merge: do it")
    p.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="with --merge --apply: no progress bar on stderr",
    )
    p.set_defaults(func=cmd_spaces, reads_only=True)


def check_space_arg(text: str) -> str:
    """An argparse ``type``: a valid space name, refused with what was given."""
    try:
        return check_space(text)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def merge(system: Any, old: str, new: str, *, apply: bool, progress: bool) -> int:
    """``--merge OLD NEW``: the dry run, or the merge with a progress bar and an ETA."""
    from tqdm import tqdm

    bar = tqdm(
        unit="doc", desc=f"merge {old} → {new}", file=sys.stderr, disable=not (apply and progress)
    )

    def advance(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        report = system.merge_spaces(old, new, apply=apply, progress=advance)
    finally:
        bar.close()
        system.close()
    print(report.describe())
    return 1 if report.index_error else 0
