"""One role of the index stress tests, looped for a fixed time; prints a JSON summary.

``python stress_worker.py ROLE URL INDEX SECONDS [SPACES [BACKEND]]``; SPACES is a
comma-separated list (default: the default space), BACKEND the index backend
(default ``local``). Roles: ``writer`` (ingest a unique note into the first space, now
and then delete an older one; at most ``LIVE_CAP`` stay live), ``update``
(update_index, then a health check of what it published), ``rebuild`` (rebuild_index,
then the same check), ``publish`` (update_index alone; the caller checks health once
the race is over) and ``checker`` (bound to each space in turn: search for every
live note of that space by its text, and check that it is found and that no note of
another space is returned).
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from pathlib import Path

from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.spaces import DEFAULT_SPACE, Spaces
from memory_pipeline.system import MemorySystem

LIVE_CAP = 30


def note(n: int, rng: random.Random, space: str = DEFAULT_SPACE) -> str:
    words = " ".join(f"w{rng.randrange(10**9):09d}" for _ in range(6))
    return f"stress note {space} {n}: {words}"


def of_space(text: str) -> str:
    """The space a note was written to, from its text."""
    return text.split()[2]


def write(system: MemorySystem, n: int, rng: random.Random, summary: dict[str, list]) -> None:
    live, deleted = summary["live"], summary["deleted"]
    text = note(n, rng, system.spaces.write)
    live.append((system.ingest_text(text, f"note-{n}").doc_id, text))
    if len(live) > LIVE_CAP or (len(live) > 5 and rng.random() < 0.5):
        victim = live.pop(rng.randrange(len(live) - 1))
        system.delete_document(victim[0])
        deleted.append(victim)


def check(system: MemorySystem, summary: dict[str, list]) -> None:
    """Every note of the space that is live before and after its search is found by its
    text, and only notes of the space are returned."""
    space = system.spaces.write
    notes = system.store.get_chunks(system.store.all_ids())  # this space's, as stored now
    summary["newest"].append(max(notes, default=0))
    for cid, record in sorted(notes.items()):
        result = system.query(
            record.content, system.settings.search_request(top_k=5, record_access=False)
        )
        summary["searches"].append(result.stats.index_version)
        leaked = [h.content for h in result.hits if of_space(h.content) != space]
        if leaked:
            summary["leaked"].append(f"{space}: {record.content!r} returned {leaked}")
        if record.doc_id not in {h.doc_id for h in result.hits} and system.store.get_chunks([cid]):
            summary["missed"].append(
                f"{space}: live {record.doc_id} not found (index version "
                f"{result.stats.index_version}, {result.stats.unindexed_searched} queued)"
            )


def main() -> None:
    role, url, index, seconds = sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])
    spaces = sys.argv[5].split(",") if len(sys.argv) > 5 else [DEFAULT_SPACE]
    backend = sys.argv[6] if len(sys.argv) > 6 else "local"
    settings = Settings(
        database_url=url,
        index_path=index,
        archive_path=index.parent / "archive",
        backend=backend,
    )
    system = MemorySystem(settings, embedder=HashingEmbedder()).bound(Spaces.bound(spaces[0]))
    bound = [system.bound(Spaces.bound(space)) for space in spaces]
    rng = random.Random(f"{role}-{spaces[0]}")
    lists: dict[str, list] = {
        k: []
        for k in (
            "failures",
            "unhealthy",
            "live",
            "deleted",
            "searches",
            "newest",
            "missed",
            "leaked",
        )
    }
    publications = 0
    print("ready", flush=True)
    sys.stdin.readline()
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        try:
            if role == "writer":
                write(system, n, rng, lists)
            elif role == "checker":
                check(bound[n % len(bound)], lists)
            else:
                result = system.rebuild_index() if role == "rebuild" else system.update_index()
                publications += result.kind != "noop"
                if role == "publish":
                    continue
                report = system.index_health()
                errors = [f.message for f in report.findings if f.severity == "error"]
                if errors:
                    lists["unhealthy"].append(f"version {result.version}: {'; '.join(errors)}")
        except Exception as exc:
            lists["failures"].append(
                f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"
            )
    summary = {"role": role, "spaces": spaces, "runs": n, "publications": publications, **lists}
    system.close()
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
