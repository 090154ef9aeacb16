"""The sync ledger: what the last sync did with each source file.

The database stays the source of truth for *what is stored*; the ledger only
remembers what the database cannot: which files failed to parse (and why), and
which documents a file produced (a conversation export yields one per session,
so a deleted export can delete them). A small JSON file, rewritten atomically
under a file lock so a CLI sync and a pipeline run never interleave.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from filelock import FileLock

from memory_pipeline.durable import replace_text
from memory_pipeline.errors import InvalidInputError

FORMAT = 1
OK = "ingested"
FAILED = "failed"


@dataclass
class LedgerEntry:
    sha256: str
    status: str  # OK | FAILED
    error: str = ""
    sources: list[str] = field(default_factory=list)  # document sources this file produced
    at: str = ""


@dataclass
class Ledger:
    path: Path
    files: dict[str, LedgerEntry] = field(default_factory=dict)

    def get(self, path: Path | str) -> LedgerEntry | None:
        return self.files.get(str(path))

    def record(
        self,
        path: Path | str,
        sha256: str,
        status: str,
        *,
        error: str = "",
        sources: list[str] | None = None,
    ) -> None:
        self.files[str(path)] = LedgerEntry(
            sha256,
            status,
            error,
            sorted(sources or []),
            dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        )

    def forget(self, path: Path | str) -> LedgerEntry | None:
        return self.files.pop(str(path), None)

    def failures(self) -> dict[str, LedgerEntry]:
        return {p: e for p, e in self.files.items() if e.status == FAILED}


def read_ledger(path: Path) -> Ledger:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Ledger(path)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(
            f"sync ledger {path} is unreadable ({exc}); delete it and run a full sync"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("files") or {}, dict):
        raise InvalidInputError(
            f'sync ledger {path} is not a ledger (a JSON object with an object "files"); '
            "delete it and run a full sync"
        )
    files = {
        p: LedgerEntry(**{k: v for k, v in e.items() if k in LedgerEntry.__dataclass_fields__})
        for p, e in (data.get("files") or {}).items()
        if isinstance(e, dict) and "sha256" in e and "status" in e
    }
    return Ledger(path, files)


def write_ledger(ledger: Ledger) -> None:
    ledger.path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": FORMAT, "files": {p: asdict(e) for p, e in sorted(ledger.files.items())}}
    replace_text(ledger.path, json.dumps(payload, ensure_ascii=False, indent=1) + "\n")


@contextmanager
def open_ledger(path: Path, timeout: float = 600.0) -> Iterator[Ledger]:
    """Read, let the caller change, write back — one writer at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_name(path.name + ".lock")), timeout=timeout):
        ledger = read_ledger(path)
        try:
            yield ledger
        finally:  # what was done before a failure is recorded too
            write_ledger(ledger)
