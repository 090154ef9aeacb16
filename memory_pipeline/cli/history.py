"""``memory-pipeline history``: what was changed in the memory, by whom and when; and
``memory-pipeline review``: the agent's changes a person accepts or reverts."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memory_pipeline.cli.flags import positive_int

if TYPE_CHECKING:
    from memory_pipeline.store.history import Change

DEFAULT_LIMIT = 50


def register(
    sub: argparse._SubParsersAction[Any],
    parents: list[argparse.ArgumentParser],
    make_system: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``history``."""

    def cmd_history(args: argparse.Namespace) -> int:
        args.reads_only = True
        system = make_system(args)
        try:
            changes = system.history(args.limit, doc_id=args.doc_id)
        finally:
            system.close()
        if args.json:
            print(json.dumps([to_dict(c) for c in changes], indent=2, ensure_ascii=False))
        else:
            print(render(changes))
        return 0

    p = sub.add_parser(
        "history",
        parents=parents,
        help="what was changed in the memory (importance, knowledge type, tags, deletions), "
        "by whom and when",
        description="List the changes made to the bound spaces' chunks and documents, newest "
        "first: a chunk's importance, knowledge type or tags (from what to what), a document "
        "deleted; each with who made it (mcp: an agent's tool; cli; page: the viewer; "
        "pipeline; api: a program) and when, and whether a person accepted or reverted an "
        "agent's change (on the viewer's page of the agent's changes). Reads only.",
    )
    p.add_argument("--doc-id", help="only this document's changes")
    p.add_argument(
        "--limit", type=positive_int, default=DEFAULT_LIMIT, help=f"default: {DEFAULT_LIMIT}"
    )
    p.add_argument("--json", action="store_true", help="machine-readable list")
    p.set_defaults(func=cmd_history)


def register_review(
    sub: argparse._SubParsersAction[Any],
    parents: list[argparse.ArgumentParser],
    make_system: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``review``."""

    def cmd_review(args: argparse.Namespace) -> int:
        from memory_pipeline.errors import MemoryPipelineError

        verdicts = [("accept", i) for i in args.accept or []]
        verdicts += [("revert", i) for i in args.revert or []]
        args.reads_only = not verdicts
        system = make_system(args)
        done: list[dict[str, Any]] = []
        try:
            if not verdicts:
                waiting = system.proposals(args.limit)
                if args.json:
                    print(json.dumps([to_dict(c) | {"id": c.id} for c in waiting], indent=2))
                else:
                    print(render_waiting(waiting))
                return 0
            for decision, change_id in verdicts:
                try:
                    change = system.review_change(change_id, decision, actor="cli")
                    done.append({"id": change_id, "review": change.review, "error": None})
                    line = f"{change.review} change {change_id}: {describe(change)}"
                except MemoryPipelineError as exc:
                    done.append({"id": change_id, "review": None, "error": str(exc)})
                    line = f"refused change {change_id}: {exc} (nothing changed)"
                if not args.json:
                    print(line)
        finally:
            system.close()
        if args.json:
            print(json.dumps(done, indent=2, ensure_ascii=False))
        return 1 if any(d["error"] for d in done) else 0

    p = sub.add_parser(
        "review",
        parents=parents,
        help="the agent's changes to chunks that wait for a person: list, accept or revert",
        description="Without --accept or --revert, list the changes the agent made to chunks "
        "over MCP (importance, knowledge type, tags) that no person has accepted or reverted, "
        "newest first, each with its id. --accept keeps a change; --revert sets the field "
        "back to what it was (recorded as cli), unless it was changed again since. The same "
        "verdicts as the viewer's page of the agent's changes. Exit 1 if a verdict was "
        "refused (that change is left as it was).",
    )
    p.add_argument("--accept", type=positive_int, nargs="+", metavar="ID", help="keep these")
    p.add_argument(
        "--revert", type=positive_int, nargs="+", metavar="ID", help="set these fields back"
    )
    p.add_argument(
        "--limit", type=positive_int, default=DEFAULT_LIMIT, help=f"default: {DEFAULT_LIMIT}"
    )
    p.add_argument("--json", action="store_true", help="machine-readable list")
    p.set_defaults(func=cmd_review)


def render_waiting(changes: Sequence[Change]) -> str:
    if not changes:
        return "no change of the agent's waits for a verdict"
    lines = [f"{c.id:>6}  {c.at:%Y-%m-%d %H:%M:%S}  {describe(c)}" for c in changes]
    return "\n".join(lines) + "\n(memory-pipeline review --accept ID … or --revert ID …)"


def to_dict(change: Change) -> dict[str, Any]:
    return {
        "at": change.at.isoformat(),
        "space": change.space,
        "actor": change.actor,
        "doc_id": change.doc_id,
        "chunk_index": change.chunk_index,
        "field": change.field,
        "before": change.before,
        "after": change.after,
        "review": change.review,
    }


def describe(change: Change) -> str:
    """One change as a person reads it: where, then what."""
    where = f"document {change.doc_id}"
    if change.chunk_index is not None:
        where += f" chunk {change.chunk_index}"
    return f"{where}: {change.what}" + (f" ({change.review} by a person)" if change.review else "")


def render(changes: Sequence[Change]) -> str:
    if not changes:
        return "no change recorded in these spaces yet"
    return "\n".join(f"{c.at:%Y-%m-%d %H:%M:%S}  {c.actor:<8}  {describe(c)}" for c in changes)
