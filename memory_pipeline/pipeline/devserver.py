"""Start and stop ``dagster dev`` for ``make run`` / ``make stop``: one per data folder.

* ``check``: refuses (exit 1, saying what to do) when a ``dagster dev`` started from
  this data folder still runs, or when the port is taken. A second one would fail on
  the port but leave its daemon running against the first one's instance.
* ``start``: runs ``dagster dev`` in a session of its own (so a stop by process group
  reaches every process it starts, and nothing else), with SIGINT and SIGTERM
  restored: started in the background of a non-interactive shell they would
  otherwise be ignored. Its pid and port are written to
  ``DAGSTER_HOME/dagster-dev.json``; Ctrl-C (or SIGTERM) here is passed on to it.
* ``stop``: SIGTERM to ``dagster dev`` (it shuts its webserver and daemon down),
  then, after a grace period, SIGKILL to whatever is left in its process group.
  Works from any shell, interactive or not.

Usage: ``python -m memory_pipeline.pipeline.devserver {check,start,stop} --home DAGSTER_HOME``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memory_pipeline.pipeline.processes import alive

STATE_FILE = "dagster-dev.json"
GRACE_SECONDS = 30.0
EXIT_REFUSED = 1


@dataclass(frozen=True)
class Running:
    pid: int
    port: int
    host: str

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running(home: Path) -> Running | None:
    """The ``dagster dev`` started from this DAGSTER_HOME, if it still runs."""
    path = home / STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        found = Running(int(data["pid"]), int(data["port"]), str(data.get("host", "127.0.0.1")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not alive(found.pid):
        path.unlink(missing_ok=True)  # left by a run that was killed: not running
        return None
    return found


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def check(home: Path, host: str, port: int) -> str | None:
    """Why a new ``dagster dev`` must not start here, or None."""
    other = running(home)
    if other is not None:
        return (
            f"Dagster is already running for this data folder (pid {other.pid}, {other.url}). "
            "Use that one, or stop it first: make stop"
        )
    if port_in_use(host, port):
        return f"port {port} on {host} is in use by another program: make run PORT=<another port>"
    return None


def _restore_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def start(home: Path, host: str, port: int, dagster_args: Sequence[str]) -> int:
    refused = check(home, host, port)
    if refused:
        print(refused, file=sys.stderr)
        return EXIT_REFUSED
    dagster = Path(sys.executable).parent / "dagster"
    cmd = [str(dagster), "dev", *dagster_args, "-h", host, "-p", str(port)]
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_restore_signals)
    state = home / STATE_FILE
    state.write_text(json.dumps({"pid": proc.pid, "port": port, "host": host}), encoding="utf-8")

    def pass_on(signum: int, _frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, pass_on)
    signal.signal(signal.SIGTERM, pass_on)
    try:
        code = proc.wait()
    finally:
        _finish(proc.pid)
        state.unlink(missing_ok=True)
    return 0 if code in (0, -signal.SIGTERM, -signal.SIGINT) else code


def _finish(pgid: int, grace: float = GRACE_SECONDS) -> None:
    """Wait for the process group to empty; SIGKILL what outlives the grace period."""
    deadline = time.monotonic() + grace
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.25)
    if _group_alive(pgid):
        os.killpg(pgid, signal.SIGKILL)


def stop(home: Path, grace: float = GRACE_SECONDS) -> int:
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
    (home / STATE_FILE).unlink(missing_ok=True)
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
