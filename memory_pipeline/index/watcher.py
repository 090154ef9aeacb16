"""Whether a pipeline keeps a memory's index up to date: the mark its sensor leaves.

The Dagster sensor that requests ``update_index`` when chunks wait
(``pending_index_sensor``) writes, on every tick, ``index-watch.json`` beside the
index folder: when it looked, how often it looks, how long it lets a burst of changes
settle, and which process looked. A command that finds chunks the published index
lacks reads the mark: while it is fresh (the last look at most ``FRESH_TICKS`` intervals
ago, by a process still alive on this machine) the pipeline indexes them shortly, and
the advice to run ``update-index`` does not apply.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

MARK = "index-watch.json"
FRESH_TICKS = 3  # a mark older than this many intervals is a pipeline that stopped


@dataclass(frozen=True)
class Watch:
    """One look of the sensor."""

    at: float  # time.time() of the look
    interval: float  # seconds between looks
    debounce: float  # seconds the queue must be still before an update is requested
    pid: int
    host: str


def mark_path(index_path: Path) -> Path:
    return Path(index_path).parent / MARK


def mark(index_path: Path, interval: float, debounce: float) -> None:
    """Record a look (atomically: a reader sees the old mark or the new one)."""
    watch = Watch(time.time(), interval, debounce, os.getpid(), socket.gethostname())
    path = mark_path(index_path)
    partial = path.with_name(f".{MARK}.{os.getpid()}")
    partial.write_text(json.dumps(asdict(watch)), encoding="utf-8")
    os.replace(partial, path)


def watching(index_path: Path, now: float | None = None) -> Watch | None:
    """The pipeline's last look when it is fresh, else None (no mark, an old one, a
    process gone, or a mark that cannot be read: then the usual advice stands)."""
    try:
        watch = Watch(**json.loads(mark_path(index_path).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None
    age = (time.time() if now is None else now) - watch.at
    if not -FRESH_TICKS * watch.interval <= age <= FRESH_TICKS * watch.interval:
        return None
    if watch.host == socket.gethostname() and not _alive(watch.pid):
        return None
    return watch


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except (OverflowError, ValueError):
        return False
    return True


def lag_note(n: int, index_path: Path) -> str:
    """What a command says about ``n`` chunks it scored outside the published index."""
    chunks = "1 chunk is" if n == 1 else f"{n} chunks are"
    them = "it" if n == 1 else "them"
    return f"{chunks} not in the published index yet (scored directly); " + advice(index_path, them)


def advice(index_path: Path, them: str = "them") -> str:
    """Who takes waiting changes into the index: the pipeline watching it, or the user."""
    watch = watching(index_path)
    if watch is None:
        return "run `memory-pipeline update-index`"
    return (
        f"the pipeline watching this memory indexes {them} shortly "
        f"(it looks every {watch.interval:g} s, once changes have been still for "
        f"{watch.debounce:g} s)"
    )
