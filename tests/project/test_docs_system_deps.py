"""``scripts/docs-system-deps.sh`` waits for apt's locks instead of failing at once.

On a fresh machine another apt (an unattended upgrade, a second set-up script) may hold
the dpkg and package-list locks when ``make docs`` starts. The test holds both locks the
way apt does (``fcntl`` write locks on the lock files) while the script runs with
Graphviz's ``dot`` hidden from its ``PATH``, so the script must reach ``apt-get``; the locks
are released a few seconds later, and the script must have waited for them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docs-system-deps.sh"
APT_LOCKS = (Path("/var/lib/dpkg/lock-frontend"), Path("/var/lib/apt/lists/lock"))

pytestmark = pytest.mark.skipif(
    os.name != "posix"
    or os.geteuid() != 0
    or shutil.which("apt-get") is None
    or not all(p.parent.is_dir() for p in APT_LOCKS),
    reason="needs root and apt (the script installs Debian packages)",
)


def path_without_dot(tmp_path: Path) -> str:
    """A PATH holding every command of the machine's but Graphviz's ``dot``, which appears
    there once the real ``apt-get`` has installed Graphviz (or found it installed)."""
    shown = tmp_path / "bin"
    shown.mkdir()
    apt_get = shutil.which("apt-get")
    dot = shutil.which("dot") or "/usr/bin/dot"
    for folder in (Path("/usr/local/bin"), Path("/usr/bin")):
        for tool in folder.iterdir():
            if tool.name not in {"dot", "apt-get"} and not (shown / tool.name).exists():
                (shown / tool.name).symlink_to(tool)
    wrapper = shown / "apt-get"
    wrapper.write_text(
        f'#!/bin/bash\n"{apt_get}" "$@" || exit\n'
        f'if [ -x "{dot}" ]; then ln -sf "{dot}" "{shown}/dot"; fi\n'
    )
    wrapper.chmod(0o755)
    return f"{shown}:/usr/local/sbin:/usr/sbin:/sbin"


def test_waits_for_the_apt_locks_held_by_another_apt(tmp_path: Path) -> None:
    held = [lock.open("a") for lock in APT_LOCKS]
    for handle in held:
        fcntl.lockf(handle, fcntl.LOCK_EX)
    release = threading.Timer(4.0, lambda: [h.close() for h in held])
    release.start()
    try:
        run = subprocess.run(
            ["bash", str(SCRIPT)],
            env={**os.environ, "PATH": path_without_dot(tmp_path)},
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        release.cancel()
        for handle in held:
            handle.close()
    assert run.returncode == 0, run.stderr
    assert "Could not get lock" not in run.stderr
