"""Start and stop ``dagster dev`` for ``make run`` / ``make stop``: one per data folder.

* ``check``: refuses (exit 1, saying what to do) when a ``dagster dev`` started from
  this data folder still runs, or when the port is taken. A second one would fail on
  the port but leave its daemon running against the first one's instance. Only a
  courtesy before ``make run``'s other steps: ``start`` decides.
* ``start``: claims the data folder first — an exclusive ``flock`` on
  ``DAGSTER_HOME/dagster-dev.lock``, one atomic step, held by this process and passed
  on to ``dagster dev`` (so it lasts while either runs, and a kill frees it). Of two
  starts at once one wins; the other exits 1 naming the winner (pid, port) and
  touches nothing. The winner runs ``dagster dev`` in a session of its own (so a stop
  by process group reaches every process it starts, and nothing else), with SIGINT
  and SIGTERM restored: started in the background of a non-interactive shell they
  would otherwise be ignored. Its pid and port are written to
  ``DAGSTER_HOME/dagster-dev.json`` (only ever by the claim's holder); Ctrl-C (or
  SIGTERM) here is passed on to it. Its output goes whole to
  ``DAGSTER_HOME/dagster-dev.log``; the terminal gets what ``TerminalFilter`` keeps
  (the pipeline's progress, warnings, errors, the UI's address), not each sensor tick.
* ``stop``: SIGTERM to ``dagster dev`` (it shuts its webserver and daemon down),
  then, after a grace period, SIGKILL to whatever is left in its process group.
  Works from any shell, interactive or not.

Usage: ``python -m memory_pipeline.pipeline.devserver {check,start,stop} --home DAGSTER_HOME``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from memory_pipeline import extras
from memory_pipeline.durable import replace_text
from memory_pipeline.pipeline.processes import EXITED, alive, process_state

STATE_FILE = "dagster-dev.json"
#: Everything ``dagster dev`` and the processes it starts print, in DAGSTER_HOME.
DEV_LOG = "dagster-dev.log"
RELAY_JOIN_SECONDS = 5.0
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DAGSTER_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4} - (?P<logger>[\w.-]+) - "
    r"(?P<level>[A-Z]+) - (?P<rest>.*)$"
)
_PY_WARNING = re.compile(r"^\S+\.py:\d+: \w*Warning: ")
_RUN_ENDS = ("RUN_SUCCESS", "RUN_FAILURE", "RUN_CANCELED")
LOCK_FILE = "dagster-dev.lock"
GRACE_SECONDS = 30.0
EXIT_REFUSED = 1
#: How long a start waits for a claim held by a starter that is still writing its
#: state file, or by one that is shutting down, before it gives up.
CLAIM_WAIT_SECONDS = 10.0
CLAIM_POLL_SECONDS = 0.05
#: A process that started this long after the state file recorded its pid is another one.
PID_REUSE_SLACK_SECONDS = 5.0


@dataclass(frozen=True)
class Running:
    pid: int
    port: int
    host: str

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class AlreadyRunning(Exception):
    """Another start holds this data folder's claim; ``other`` is it, when its state is known."""

    def __init__(self, other: Running | None) -> None:
        self.other = other
        who = (
            f"pid {other.pid}, port {other.port}, {other.url}"
            if other is not None
            else "still starting, its pid not written yet"
        )
        super().__init__(
            f"Dagster is already running for this data folder ({who}). "
            "Use that one, or stop it first: make stop"
        )


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(home: Path) -> Running | None:
    """The ``dagster dev`` started from this DAGSTER_HOME, if it still runs.

    Reads the state file and nothing else: a file left by a start that was killed names
    a process that is gone (or a newer one that took its pid), and is ignored here; the
    next start that wins the claim replaces it."""
    try:
        data = json.loads((home / STATE_FILE).read_text(encoding="utf-8"))
        found = Running(int(data["pid"]), int(data["port"]), str(data.get("host", "127.0.0.1")))
        recorded = data.get("started")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    state = process_state(found.pid)
    if state is None or state[0] in EXITED:
        return None
    started = state[1]
    reused = (
        isinstance(recorded, int | float)
        and started is not None
        and started > recorded + PID_REUSE_SLACK_SECONDS
    )
    return None if reused else found


def claim(home: Path, wait: float = CLAIM_WAIT_SECONDS) -> int:
    """Claim the data folder for one ``dagster dev``: the descriptor of its lock file,
    locked (``flock``, exclusive), to keep open while it runs.

    Checking and claiming are one step, so of two starts at once exactly one gets it.
    While another start holds it: ``AlreadyRunning`` naming that one as soon as its state
    file does; a holder with no live state (it is writing it, or shutting down) is
    waited for, up to ``wait`` seconds. Nothing is written or removed here."""
    fd = os.open(home / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            other = running(home)
            if other is not None or time.monotonic() >= deadline:
                os.close(fd)
                raise AlreadyRunning(other) from None
            time.sleep(CLAIM_POLL_SECONDS)


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _port_refusal(host: str, port: int) -> str | None:
    if port_in_use(host, port):
        return f"port {port} on {host} is in use by another program: make run PORT=<another port>"
    return None


def check(home: Path, host: str, port: int) -> str | None:
    """Why a new ``dagster dev`` must not start here, or None (``start`` decides: this
    claims nothing)."""
    other = running(home)
    if other is not None:
        return str(AlreadyRunning(other))
    return _dagster_refusal() or _port_refusal(host, port)


def _dagster_command() -> Path:
    return Path(sys.executable).parent / "dagster"


def _dagster_refusal() -> str | None:
    """Dagster is the ``pipeline`` extra: without it, the line that says how to add it."""
    if importlib.util.find_spec("dagster") is None or not _dagster_command().exists():
        reason = f"no dagster beside {sys.executable}"
        return extras.missing("the pipeline (dagster dev)", extras.PIPELINE, reason)
    return None


def _restore_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _write_state(home: Path, proc: subprocess.Popen[bytes], host: str, port: int) -> None:
    """Written whole (a reader never sees half of it), by the claim's holder alone."""
    state = process_state(proc.pid)
    data = {
        "pid": proc.pid,
        "port": port,
        "host": host,
        "started": state[1] if state is not None else None,
        "starter": os.getpid(),
    }
    replace_text(home / STATE_FILE, json.dumps(data))


def start(home: Path, host: str, port: int, dagster_args: Sequence[str]) -> int:
    try:
        lock = claim(home)
    except AlreadyRunning as exc:
        print(exc, file=sys.stderr)
        return EXIT_REFUSED
    try:
        return _run_claimed(home, lock, host, port, dagster_args)
    finally:
        os.close(lock)


def _run_claimed(home: Path, lock: int, host: str, port: int, dagster_args: Sequence[str]) -> int:
    refused = _dagster_refusal() or _port_refusal(host, port)
    if refused:
        print(refused, file=sys.stderr)
        return EXIT_REFUSED
    proc: subprocess.Popen[bytes] | None = None
    stopping = False

    def pass_on(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, pass_on)
    signal.signal(signal.SIGTERM, pass_on)
    cmd = [str(_dagster_command()), "dev", *dagster_args, "-h", host, "-p", str(port)]
    state = home / STATE_FILE
    log = home / DEV_LOG
    relay: threading.Thread | None = None
    print(f"Dagster's own log: {log} (here: the pipeline's progress, warnings and errors)")
    sys.stdout.flush()
    try:
        proc = subprocess.Popen(
            cmd,
            start_new_session=True,
            preexec_fn=_restore_signals,
            pass_fds=(lock,),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # lines as they come, not at exit
        )
        relay = threading.Thread(target=_relay, args=(proc.stdout, log), daemon=True)
        relay.start()
        _write_state(home, proc, host, port)
        if stopping:  # asked to stop while it was being started
            proc.send_signal(signal.SIGTERM)
        code = proc.wait()
    finally:
        if proc is not None:
            _finish(proc.pid)
        if relay is not None:
            relay.join(timeout=RELAY_JOIN_SECONDS)
        state.unlink(missing_ok=True)
    if code in (0, -signal.SIGTERM, -signal.SIGINT):
        return 0
    print(f"dagster dev exited with code {code}; its whole output is in {log}", file=sys.stderr)
    return code


class TerminalFilter:
    """Which of ``dagster dev``'s lines reach the terminal (all of them go to its log).

    Shown: warnings and errors, the pipeline's own log lines (Dagster's ``dagster``
    logger at INFO with a job or sensor named: what this project's assets and sensors
    say), runs that end, the webserver's address, and lines outside Dagster's format
    (the project's prints, tracebacks) except Python's warnings. Hidden: the daemons'
    INFO chatter (each sensor tick), the runs' DEBUG events. A continuation line
    (indented) goes where the line before it went.
    """

    def __init__(self) -> None:
        self._last = True

    def shown(self, raw: str) -> bool:
        line = _ANSI.sub("", raw).rstrip("\n")
        found = _DAGSTER_LINE.match(line)
        if found is None:
            if not line[:1].isspace():
                self._last = _PY_WARNING.match(line) is None
            return self._last
        logger, level, rest = found.group("logger", "level", "rest")
        self._last = (
            level in ("WARNING", "ERROR", "CRITICAL")
            or (logger == "dagster" and level == "INFO" and " - " in rest)
            or any(f" - {event} - " in rest for event in _RUN_ENDS)
            or (logger == "dagster-webserver" and rest.startswith("Serving"))
        )
        return self._last


def _relay(stream: IO[bytes] | None, log: Path) -> None:
    """Copy every line to the log (appended), and the ones ``TerminalFilter`` keeps to
    stdout; a terminal that went away costs the terminal's copy, never the log's."""
    if stream is None:
        return
    keep = TerminalFilter()
    terminal: IO[bytes] | None = sys.stdout.buffer
    with log.open("ab") as out:
        for raw in iter(stream.readline, b""):
            out.write(raw)
            out.flush()
            if terminal is not None and keep.shown(raw.decode("utf-8", "replace")):
                try:
                    terminal.write(raw)
                    terminal.flush()
                except (OSError, ValueError):
                    terminal = None


def _finish(pgid: int, grace: float = GRACE_SECONDS) -> None:
    """Wait for the process group to empty; SIGKILL what outlives the grace period."""
    deadline = time.monotonic() + grace
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.25)
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)


def stop(home: Path, grace: float = GRACE_SECONDS) -> int:
    """Stop the ``dagster dev`` the state file names. The state file is its starter's to
    remove (a stop that removed it could remove the next start's)."""
    found = running(home)
    if found is None:
        print(f"no Dagster is running for {home.parent} (nothing to stop)")
        return 0
    print(f"stopping Dagster (pid {found.pid}, {found.url}) …")
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while alive(found.pid) and time.monotonic() < deadline:
        time.sleep(0.25)
    _finish(found.pid, max(0.0, deadline - time.monotonic()))
    print("stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="start, check or stop the dagster dev of one data folder (make run / stop)"
    )
    parser.add_argument("action", choices=("check", "start", "stop"))
    parser.add_argument("--home", required=True, help="DAGSTER_HOME of the data folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000)
    parser.epilog = "arguments after -- are passed to dagster dev, e.g. -- -w workspace.yaml"
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.dagster_args = argv[cut + 1 :]
    home = Path(args.home)
    if args.action == "stop":
        return stop(home)
    if args.action == "check":
        refused = check(home, args.host, args.port)
        if refused:
            print(refused, file=sys.stderr)
            return EXIT_REFUSED
        return 0
    home.mkdir(parents=True, exist_ok=True)
    return start(home, args.host, args.port, args.dagster_args)


if __name__ == "__main__":
    sys.exit(main())
