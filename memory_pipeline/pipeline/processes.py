"""Is a process alive, and since when: read from ``/proc`` (no Dagster here).

Shared by the run launcher's worker-death check and ``make run`` / ``make stop``'s
launcher, which must start without importing Dagster.
"""

from __future__ import annotations

import os
from pathlib import Path

#: States of a process that has exited but not been reaped (zombie) or is being torn down.
EXITED = ("Z", "X")


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def process_state(pid: int) -> tuple[str, float | None] | None:
    """(state letter, start time as a Unix timestamp) of a live pid; None when it is gone.

    Without ``/proc`` only liveness is known (state "?", no start time)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None if Path("/proc/self/stat").exists() else ("?", None)
    except OSError:
        return ("?", None)
    fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3
    boot = _boot_time()
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK") if boot is not None else None
    return fields[0], started


def alive(pid: int) -> bool:
    """The process runs (a zombie does not)."""
    state = process_state(pid)
    return state is not None and state[0] not in EXITED
