"""Child processes for the crash tests: started, waited for, then told to go."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def spawn_ready(worker: Path, *args: str) -> subprocess.Popen[str]:
    """Start ``python worker args...`` and return once it printed "ready".

    The worker has then imported everything and opened the memory, so the time to
    a kill measures the work itself, not interpreter start-up.
    """
    proc = subprocess.Popen(
        [sys.executable, str(worker), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def go(proc: subprocess.Popen[str]) -> None:
    """Tell a ready worker to start its work."""
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
