"""``make run`` / ``make stop``'s launcher: one ``dagster dev`` per data folder, even when
two starts race.

The starters are real processes running the real ``devserver start``; the ``dagster``
they launch is a stand-in next to their interpreter (a sleeping shell script that notes
its pid), so no real ``dagster dev`` has to start twice.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memory_pipeline.pipeline import devserver

REPO = Path(__file__).resolve().parents[2]
WAIT = 30.0  # generous: only ever reached when something is wrong

# Each starter waits for the go file, then runs ``devserver start`` with the stand-in
# ``dagster`` (the one next to ``sys.executable``) — both at once.
STARTER = """
import os, sys, time
from pathlib import Path
go, bin_dir = Path(sys.argv[1]), sys.argv[2]
while not go.exists():
    time.sleep(0.001)
sys.executable = os.path.join(bin_dir, "python")
from memory_pipeline.pipeline import devserver
sys.exit(devserver.main(sys.argv[3:]))
"""

FAKE_DAGSTER = """#!/bin/sh
echo $$ >> "{started}"
exec sleep 600
"""


@dataclass
class Starter:
    proc: subprocess.Popen[str]

    def finished(self) -> bool:
        return self.proc.poll() is not None


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    dagster = bin_dir / "dagster"
    dagster.write_text(FAKE_DAGSTER.format(started=tmp_path / "started"), encoding="utf-8")
    dagster.chmod(0o755)
    return bin_dir


def launch(home: Path, go: Path, bin_dir: Path, port: int) -> Starter:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            STARTER,
            str(go),
            str(bin_dir),
            "start",
            "--home",
            str(home),
            "--port",
            str(port),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return Starter(proc)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def started_pids(tmp_path: Path) -> list[int]:
    path = tmp_path / "started"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def wait_until(what: str, condition: object) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.02)
    pytest.fail(f"{what}: not within {WAIT:.0f}s")


@pytest.fixture
def starters() -> Iterator[list[Starter]]:
    made: list[Starter] = []
    yield made
    for s in made:  # whatever the test left running: each by its own pid
        if not s.finished():
            s.proc.send_signal(signal.SIGTERM)
            try:
                s.proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                s.proc.kill()
                s.proc.wait()


def test_two_starts_at_once_one_wins_the_other_is_refused_and_touches_nothing(
    tmp_path: Path, fake_bin: Path, starters: list[Starter]
) -> None:
    home, go = tmp_path / "dagster_home", tmp_path / "go"
    home.mkdir()
    port = free_port()
    starters.extend(launch(home, go, fake_bin, port) for _ in range(2))
    time.sleep(0.5)  # both interpreters up and polling for the go file
    go.touch()

    wait_until("one starter refused", lambda: any(s.finished() for s in starters))
    [loser] = [s for s in starters if s.finished()]
    [winner] = [s for s in starters if s is not loser]
    _, err = loser.proc.communicate()
    assert loser.proc.returncode == devserver.EXIT_REFUSED
    assert "already running for this data folder" in err
    assert f"{port}" in err and "make stop" in err

    wait_until("the winner's dagster started", lambda: started_pids(tmp_path))
    [dagster_pid] = started_pids(tmp_path)  # the loser started nothing
    state = json.loads((home / devserver.STATE_FILE).read_text())
    assert state["pid"] == dagster_pid and state["port"] == port
    assert f"pid {dagster_pid}" in err
    assert not winner.finished()

    found = devserver.running(home)
    assert found is not None and found.pid == dagster_pid
    assert devserver.stop(home) == 0
    assert winner.proc.wait(timeout=WAIT) == 0
    assert devserver.running(home) is None
    assert not (home / devserver.STATE_FILE).exists()


def test_a_start_after_a_killed_one_is_not_refused(
    tmp_path: Path, fake_bin: Path, starters: list[Starter]
) -> None:
    """A state file left by a starter killed with everything it started blocks nothing."""
    home, go = tmp_path / "dagster_home", tmp_path / "go"
    home.mkdir()
    go.touch()
    port = free_port()
    first = launch(home, go, fake_bin, port)
    starters.append(first)
    wait_until("the first dagster started", lambda: started_pids(tmp_path))
    [stale] = started_pids(tmp_path)
    wait_until("the state file", lambda: (home / devserver.STATE_FILE).exists())
    first.proc.kill()  # no clean-up of its own, then what it started
    first.proc.wait()
    os.kill(stale, signal.SIGKILL)
    wait_until("the first dagster gone", lambda: devserver.running(home) is None)

    second = launch(home, go, fake_bin, port)
    starters.append(second)
    wait_until("the second dagster started", lambda: len(started_pids(tmp_path)) == 2)
    wait_until(
        "the state names the second",
        lambda: (found := devserver.running(home)) is not None and found.pid != stale,
    )
    assert not second.finished()
    assert devserver.stop(home) == 0
    assert second.proc.wait(timeout=WAIT) == 0


# What a real ``dagster dev`` printed in the first minutes of ``make run`` (abridged; the
# daemons' and the webserver's lines coloured as on a terminal), and what of it the
# terminal is meant to show.
DAGSTER_OUTPUT = [
    (".../click/core.py:911: SupersessionWarning: Function `dev_command` is superseded", False),
    ("  return callback(*args, **kwargs)", False),
    (
        "\x1b[32m2026-12-07 01:45:59 +0000\x1b[0m - dagster - \x1b[34mINFO\x1b[0m - Launching Dagster services...",
        False,
    ),
    (
        "\x1b[32m2026-12-07 01:46:03 +0000\x1b[0m - dagster.daemon.SensorDaemon - \x1b[34mINFO\x1b[0m - Checking for new runs for sensor: source_files_sensor",
        False,
    ),
    (
        "\x1b[32m2026-12-07 01:46:03 +0000\x1b[0m - dagster.daemon.EventLogConsumerDaemon - \x1b[34mWARNING\x1b[0m - No cursor for event type RUN_FAILURE",
        True,
    ),
    (
        "2026-12-07 01:46:03 +0000 - dagster - INFO - __repository__ - source_files_sensor - requesting ingest of 8 files, removal of 0",
        True,
    ),
    (
        "\x1b[32m2026-12-07 01:46:04 +0000\x1b[0m - dagster-webserver - \x1b[34mINFO\x1b[0m - Serving dagster-webserver on http://127.0.0.1:3000 in process 11581",
        True,
    ),
    (
        "\x1b[32m2026-12-07 01:46:10 +0000\x1b[0m - dagster.daemon.QueuedRunCoordinatorDaemon - \x1b[34mINFO\x1b[0m - Launched 1 runs.",
        False,
    ),
    ("building multilingual-e5-small's ONNX graph (once, into the model cache) …", True),
    (
        '2026-12-07 01:46:20 +0000 - dagster - DEBUG - ingest_sources - 2779b7a5 - 11784 - documents - STEP_START - Started execution of step "documents".',
        False,
    ),
    (
        '2026-12-07 01:46:21 +0000 - dagster - ERROR - ingest_sources - 2779b7a5 - 11784 - embeddings - STEP_FAILURE - Execution of step "embeddings" failed.',
        True,
    ),
    ("Traceback (most recent call last):", True),
    ('  File "x.py", line 1, in <module>', True),
    (
        '2026-12-07 01:46:21 +0000 - dagster - DEBUG - ingest_sources - 2779b7a5 - 11784 - RUN_FAILURE - Execution of run for "ingest_sources" failed.',
        True,
    ),
    (
        "2026-12-07 01:47:12 +0000 - dagster - INFO - forgetting - 3a81 - forgetting_candidates - forgetting batch (DRY RUN — nothing changed)",
        True,
    ),
    ("  0 of 33 live chunks are candidates (0.0%; limit 6 without force)", True),
    (
        "\x1b[32m2026-12-07 01:47:13 +0000\x1b[0m - dagster.daemon.MonitoringDaemon - \x1b[34mINFO\x1b[0m - Checking run 2779b7a5",
        False,
    ),
    ("  a continuation of a hidden line", False),
]


def test_the_terminal_gets_the_pipelines_progress_and_the_log_gets_everything(
    tmp_path: Path, starters: list[Starter]
) -> None:
    home, go, bin_dir = tmp_path / "dagster_home", tmp_path / "go", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    go.touch()
    output = tmp_path / "output.txt"
    output.write_text("".join(f"{line}\n" for line, _ in DAGSTER_OUTPUT), encoding="utf-8")
    dagster = bin_dir / "dagster"
    dagster.write_text(f'#!/bin/sh\ncat "{output}"\nexec sleep 600\n', encoding="utf-8")
    dagster.chmod(0o755)
    starter = launch(home, go, bin_dir, free_port())
    starters.append(starter)
    log = home / devserver.DEV_LOG
    wait_until(
        "the whole output in the log",
        lambda: (
            log.exists() and log.read_text(encoding="utf-8") == output.read_text(encoding="utf-8")
        ),
    )
    assert devserver.stop(home) == 0
    out, _ = starter.proc.communicate(timeout=WAIT)
    assert starter.proc.returncode == 0
    first, *relayed = out.splitlines()
    assert first == f"Dagster's own log: {log} (here: the pipeline's progress, warnings and errors)"
    assert relayed == [line for line, shown in DAGSTER_OUTPUT if shown]
