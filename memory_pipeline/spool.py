"""Captured sessions waiting to be stored: a spool folder, one file per session, one worker.

A Claude Code hook must return at once, so ``memory-pipeline capture`` only writes what
it was told (which transcript, which space) to ``<session>.capture`` here, whole (written
aside, then renamed), and starts a worker. The worker holds the spool's lock, renames
each pending file to ``.work`` (claimed: a newer capture of the same session may write
its ``.capture`` again meanwhile), stores the sessions and removes a ``.work`` file only
once its session is stored. A worker killed at any moment leaves its ``.work`` files;
the next holder of the lock takes them again, and storing a session that is already
current does nothing. Level-based: whatever is in the folder is what is still to do.

Plain files and ``flock`` only: the hook imports this and nothing heavy.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from memory_pipeline.durable import replace_text
from memory_pipeline.errors import InvalidInputError

PENDING = ".capture"
CLAIMED = ".work"
LOCK_NAME = "worker.lock"
LOG_NAME = "capture.log"
LEDGER_NAME = "ledger.json"
#: Captures refused for good, each with its reason: out of the queue, kept to be seen.
FAILED_DIR = "failed"
#: The last run of a worker that could not run (its reason): removed by the next that ends well.
FAILURE_NAME = "worker.failed"
#: What the user runs to see, retry or drop what waits or was set aside.
STATUS_COMMAND = "memory-pipeline capture --status"
#: The characters of a worker's failure a notice shows (``--status`` shows it whole).
NOTICE_REASON = 200
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Capture:
    """One session to store: its transcript, the space it goes to, and what asked."""

    session_id: str
    transcript: str
    space: str
    cwd: str = ""
    event: str = ""
    root: str = ""  # the root of the project at cwd (``spaces.repository_root``)

    @property
    def stem(self) -> str:
        """The spool file's name: one per session and space, whatever the event."""
        key = hashlib.sha256(f"{self.space}\0{self.transcript}".encode()).hexdigest()[:12]
        return f"{_UNSAFE.sub('_', self.session_id)[:64]}-{key}"


def write_pending(spool: Path, capture: Capture) -> Path:
    """Record ``capture`` as pending (whole or not at all); a pending capture of the same
    session is replaced by this one."""
    spool.mkdir(parents=True, exist_ok=True)
    path = spool / f"{capture.stem}{PENDING}"
    replace_text(path, json.dumps(asdict(capture), ensure_ascii=False) + "\n")
    return path


def _capture_of(raw: dict[str, object]) -> Capture:
    """The capture a spool record holds (a pending file, or one set aside with more keys)."""
    return Capture(**{k: str(raw[k]) for k in Capture.__dataclass_fields__ if k in raw})


def read_capture(path: Path) -> Capture:
    try:
        return _capture_of(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise InvalidInputError(f"pending capture {path.name} cannot be read: {exc}") from exc


def waiting(spool: Path) -> list[Path]:
    """Every capture not stored yet: pending ones and those a worker claimed."""
    if not spool.is_dir():
        return []
    return sorted(p for p in spool.iterdir() if p.suffix in (PENDING, CLAIMED))


def claim(spool: Path) -> list[Path]:
    """Claim every pending capture (the lock holder only): ``.capture`` becomes ``.work``,
    replacing an older claim of the same session. The claimed files, oldest claims too."""
    for path in waiting(spool):
        if path.suffix == PENDING:
            os.replace(path, path.with_suffix(CLAIMED))
    return [p for p in waiting(spool) if p.suffix == CLAIMED]


@contextmanager
def worker_lock(spool: Path) -> Iterator[bool]:
    """Try the spool's lock without waiting: True inside when this process holds it (its
    pid is then in the lock file), False when another worker does. The kernel releases
    it when the holder dies, however it dies."""
    spool.mkdir(parents=True, exist_ok=True)
    fd = os.open(spool / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def set_aside(spool: Path, claimed: Path, capture: Capture, reason: str) -> Path:
    """Take a claimed capture out of the queue for good, kept with ``reason`` under
    ``failed/`` (written whole before the claim is removed: a kill between the two
    leaves the claim, which the next worker sets aside again)."""
    kept = spool / FAILED_DIR / f"{capture.stem}.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    record = {**asdict(capture), "reason": reason, "set_aside_at": stamp}
    replace_text(kept, json.dumps(record, ensure_ascii=False) + "\n")
    claimed.unlink(missing_ok=True)
    return kept


def examine(capture: Capture) -> str | None:
    """Why the capture's transcript cannot be read, or None when it is a file that opens.
    Opened without blocking: a named pipe or a device given as the transcript would hold
    the worker (and every capture behind it) for good."""
    try:
        fd = os.open(capture.transcript, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "the transcript is not a regular file (a pipe, a device or a folder)"
            return None
        finally:
            os.close(fd)
    except FileNotFoundError:
        return "the transcript is gone"
    except OSError as exc:
        return (
            f"the transcript cannot be examined: {exc.strerror or exc} ({exc.__class__.__name__})"
        )


def log(spool: Path, line: str) -> None:
    """One line in the spool's log; a log that cannot be written is not the hook's problem."""
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    try:
        spool.mkdir(parents=True, exist_ok=True)
        with open(spool / LOG_NAME, "a", encoding="utf-8") as fh:
            fh.write(f"{stamp} [{os.getpid()}] {' '.join(line.split())}\n")
    except OSError:
        pass


def note_failure(spool: Path, reason: str) -> None:
    """Record that a worker could not run, and why (its first line): the next
    ``SessionStart`` and ``capture --status`` say so until a worker ends well."""
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    first = reason.strip().splitlines()[0] if reason.strip() else "no reason given"
    try:
        spool.mkdir(parents=True, exist_ok=True)
        replace_text(spool / FAILURE_NAME, json.dumps({"reason": first, "at": stamp}) + "\n")
    except OSError:
        pass  # the log still has it


def clear_failure(spool: Path) -> None:
    (spool / FAILURE_NAME).unlink(missing_ok=True)


@dataclass(frozen=True)
class Kept:
    """A capture set aside for good: where its record is, what it was and why."""

    path: Path
    capture: Capture
    reason: str
    set_aside_at: str

    @property
    def name(self) -> str:
        return self.path.stem


@dataclass(frozen=True)
class Status:
    """What the capture folder holds besides the stored: captures waiting (pending or
    claimed), captures set aside with their reasons, ledgers set aside, and the failure
    of the last worker that could not run."""

    waiting: list[Path]
    kept: list[Kept]
    ledgers: list[Path]
    failure: dict[str, str] | None

    @property
    def counts(self) -> dict[str, int]:
        return {
            "waiting": len(self.waiting),
            "set_aside": len(self.kept),
            "ledgers_set_aside": len(self.ledgers),
            "worker_failed": int(self.failure is not None),
        }

    def notice(self) -> str:
        """One line for the user when something needs them, else "": the worker cannot
        run, or captures or a ledger were set aside; with what to run."""
        parts = []
        if self.failure is not None:
            reason = self.failure["reason"]
            reason = reason if len(reason) <= NOTICE_REASON else reason[: NOTICE_REASON - 1] + "…"
            parts.append(
                f"{sessions(len(self.waiting))} not stored yet: the capture worker could "
                f"not run ({reason})"
            )
        if self.kept:
            parts.append(f"{sessions(len(self.kept))} set aside, not stored")
        if self.ledgers:
            parts.append("an unreadable capture ledger was set aside and a new one begun")
        if not parts:
            return ""
        return f"memory-pipeline: {'; '.join(parts)}. Run `{STATUS_COMMAND}` to see why."


def sessions(n: int) -> str:
    return f"{n} captured session" + ("" if n == 1 else "s")


def status(spool: Path) -> Status:
    """The capture folder as ``capture --status`` shows it; reads only. A record that
    cannot be read is listed with that as its reason."""
    kept = []
    folder = spool / FAILED_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            capture = _capture_of(raw)
            kept.append(Kept(path, capture, str(raw["reason"]), str(raw.get("set_aside_at", ""))))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            blank = Capture(session_id=path.stem, transcript="", space="")
            kept.append(Kept(path, blank, f"its record cannot be read: {exc}", ""))
    failure = None
    try:
        raw = json.loads((spool / FAILURE_NAME).read_text(encoding="utf-8"))
        failure = {"reason": str(raw["reason"]), "at": str(raw["at"])}
    except FileNotFoundError:
        pass
    except (OSError, ValueError, TypeError, KeyError) as exc:
        failure = {"reason": f"its record cannot be read: {exc}", "at": ""}
    ledgers = sorted(spool.glob(f"{LEDGER_NAME}.unreadable-*")) if spool.is_dir() else []
    return Status(waiting(spool), kept, ledgers, failure)
