"""``memory-pipeline scrub``: find (and with ``--apply`` take out) the secrets and private
spans a memory already holds (``memory/scrub.py``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memory_pipeline.cli.flags import add_all_spaces

if TYPE_CHECKING:
    from memory_pipeline.memory.scrub import Outcome

#: Places listed in the text report; --json lists every one.
SHOWN_PLACES = 200


def register(
    sub: argparse._SubParsersAction[Any],
    parents: list[argparse.ArgumentParser],
    make_system: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``scrub``."""

    def cmd_scrub(args: argparse.Namespace) -> int:
        system = make_system(args)
        try:

            def say(stage: str) -> None:
                if not args.json:
                    print(f"scrub: {stage}…", file=sys.stderr, flush=True)

            outcome = system.scrub(apply=args.apply, progress=say)
            described = system.spaces.describe()
            every = system.spaces.read is None  # bound to every space (--all-spaces)
        finally:
            system.close()
        if args.json:
            print(json.dumps(to_dict(outcome, described), indent=2, ensure_ascii=False))
        else:
            print(render(outcome, described, every=every))
        return 0

    p = sub.add_parser(
        "scrub",
        parents=parents,
        help="find the secrets and <private> spans the memory already holds "
        "(dry run; --apply takes them out)",
        description="Read every text the memory keeps in the bound space (or every space "
        "with --all-spaces): each chunk's text, index text and tags, each document's title "
        "and source, what was handed to agents, the forgetting archive and, with "
        "--all-spaces, the capture spool, through the same redaction step as what comes "
        "in. Lists what it would change: the kind of secret and where, never the value. "
        "With --apply it rewrites them (a new vector for each chunk changed), rebuilds the "
        "index without its earlier versions and rewrites the database's files so that no "
        "freed page keeps the old text. Killed at any point it loses nothing; run it again.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--apply", dest="apply", action="store_true", help="take them out")
    mode.add_argument(
        "--dry-run", dest="apply", action="store_false", help="only report (the default)"
    )
    add_all_spaces(p, "scrub")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(func=cmd_scrub, apply=False)


def to_dict(outcome: Outcome, spaces: str) -> dict[str, Any]:
    plan = outcome.plan
    return {
        "spaces": spaces,
        "applied": outcome.applied,
        "found": sum(plan.by_kind.values()),
        "by_kind": dict(sorted(plan.by_kind.items())),
        "changes": plan.places,
        "places": [{"kind": f.kind, "place": f.place, "count": f.count} for f in plan.findings],
        "purged": outcome.purged,
    }


def render(outcome: Outcome, spaces: str, *, every: bool = False) -> str:
    plan = outcome.plan
    total = sum(plan.by_kind.values())
    head = "scrub" if outcome.applied else "scrub (dry run)"
    if not plan:
        lines = [f"{head} of {spaces}: nothing found."]
        if outcome.applied:
            lines += [f"  {line}" for line in outcome.purged]
        return "\n".join(lines)
    lines = [f"{head} of {spaces}: {total} found in {len(plan.findings)} places", "", "by kind:"]
    width = max(len(k) for k in plan.by_kind)
    lines += [f"  {k:<{width}}  {n}" for k, n in sorted(plan.by_kind.items())]
    lines += ["", "where:"]
    for f in plan.findings[:SHOWN_PLACES]:
        lines.append(f"  {f.place}: {f.kind}" + (f" ×{f.count}" if f.count > 1 else ""))
    if len(plan.findings) > SHOWN_PLACES:
        lines.append(f"  … {len(plan.findings) - SHOWN_PLACES} more (--json lists them all)")
    changes = ", ".join(f"{n} {what}" for what, n in plan.places.items())
    if outcome.applied:
        lines += ["", f"rewritten: {changes}; the index rebuilt without its earlier versions"]
        lines += [f"  {line}" for line in outcome.purged]
    else:
        lines += [
            "",
            f"would change: {changes}",
            "take them out with: memory-pipeline scrub --apply"
            + (" --all-spaces" if every else ""),
        ]
    return "\n".join(lines)
