"""One role of the index stress test, looped for a fixed time; prints a JSON summary.

Roles: ``writer`` (ingest a unique note, now and then delete an older one),
``update`` (update_index, then a health check of what it published) and
``rebuild`` (rebuild_index, then the same check).
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
from memory_pipeline.system import MemorySystem


def note(n: int, rng: random.Random) -> str:
    words = " ".join(f"w{rng.randrange(10**9):09d}" for _ in range(6))
    return f"stress note {n}: {words}"


def main() -> None:
    role, url, index, seconds = sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])
    settings = Settings(database_url=url, index_path=index, archive_path=index.parent / "archive")
    system = MemorySystem(settings, embedder=HashingEmbedder())
    rng = random.Random(role)
    summary: dict[str, object] = {"role": role, "runs": 0, "failures": [], "unhealthy": []}
    failures: list[str] = summary["failures"]  # type: ignore[assignment]
    unhealthy: list[str] = summary["unhealthy"]  # type: ignore[assignment]
    live: list[tuple[str, str]] = []
    deleted: list[tuple[str, str]] = []
    print("ready", flush=True)
    sys.stdin.readline()
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        try:
            if role == "writer":
                text = note(n, rng)
                live.append((system.ingest_text(text, f"note-{n}").doc_id, text))
                if len(live) > 5 and rng.random() < 0.5:
                    victim = live.pop(rng.randrange(len(live) - 1))
                    system.delete_document(victim[0])
                    deleted.append(victim)
            else:
                result = system.update_index() if role == "update" else system.rebuild_index()
                report = system.index_health()
                errors = [f.message for f in report.findings if f.severity == "error"]
                if errors:
                    unhealthy.append(f"version {result.version}: {'; '.join(errors)}")
        except Exception as exc:
            failures.append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        summary["runs"] = n
    summary["live"] = live
    summary["deleted"] = deleted
    system.close()
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
