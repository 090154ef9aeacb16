"""One memory, many sessions: six stdio servers in three projects on the one default memory.

Six agent sessions, two per project, each start the server as a client would: in the
project's folder, with the project's space, and nothing naming the memory, so all six
open the user's one default memory (``$XDG_DATA_HOME/memory-pipeline``). For
``SECONDS`` each session writes notes and searches for notes of its space (its own and
its sibling's) and of the other spaces, while a seventh process runs
``memory-pipeline update-index`` over and over. No call may fail; every note must be
found by its text in its space, exactly once, and never in another space; afterwards
the store holds each note once and ``memory-pipeline health`` is clean.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from serving.harness import REPO, error_text

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

#: How long the sessions write and search side by side.
SECONDS = 60.0
PROJECTS = ("alpha", "beta", "gamma")
SESSIONS_PER_PROJECT = 2
#: An agent's mean pause between one step (a note written, two searches) and the next.
PAUSE = 1.0
#: The least work each session and the update loop must have done for the run to count.
MIN_NOTES, MIN_SEARCHES, MIN_UPDATES = 5, 5, 3
#: ``memory-pipeline`` as its installed script runs it, from this checkout.
CLI = ("-c", "import sys; from memory_pipeline.cli import main; sys.exit(main())")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Note:
    space: str
    title: str
    text: str


@dataclass
class Race:
    """What every session shares: the notes written so far and everything that went wrong."""

    home: Path
    notes: dict[str, list[Note]] = field(default_factory=lambda: {p: [] for p in PROJECTS})
    errors: list[str] = field(default_factory=list)
    written: Counter[str] = field(default_factory=Counter)
    searches: Counter[str] = field(default_factory=Counter)
    updates: int = 0

    def env(self, space: str | None = None) -> dict[str, str]:
        """A client's environment: the one home, the test embedder; no storage path."""
        env = {
            "HOME": str(self.home),
            "XDG_DATA_HOME": str(self.home / "data"),
            "XDG_CACHE_HOME": str(self.home / "cache"),
            "HYBRID_RAG_EMBEDDING_MODEL": "hashing",
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": str(REPO),
        }
        return env | ({"HYBRID_RAG_SPACE": space} if space else {})

    def server(self, project: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=[*CLI, "serve"],
            env=self.env(project),
            cwd=self.home.parent / project,
        )


def new_note(space: str, session: str, n: int, rng: random.Random) -> Note:
    words = " ".join(f"w{rng.randrange(10**9):09d}" for _ in range(6))
    return Note(space, f"{session}/n{n}", f"note of {space} from {session}: {words}")


async def call(client: Client, race: Race, who: str, tool: str, **args: Any) -> dict[str, Any]:
    """The call's structured content; a tool error is recorded and gives an empty dict."""
    try:
        result = await client.call_tool(tool, args)
    except Exception as exc:  # a broken session must show up in the report, not hang the race
        race.errors.append(f"{who} {tool}: {type(exc).__name__}: {exc}")
        return {}
    if result.is_error or result.structured_content is None:
        race.errors.append(f"{who} {tool}: {error_text(result)}")
        return {}
    return dict(result.structured_content)


def check_hits(race: Race, who: str, space: str, note: Note, out: dict[str, Any]) -> None:
    """Searched for ``note``'s text in ``space``: found exactly once if it is of the
    space, else not at all; and nothing of another space is returned."""
    titles = [chunk["title"] for chunk in out.get("chunks", [])]
    found = titles.count(note.title)
    expected = 1 if note.space == space else 0
    if found != expected:
        race.errors.append(f"{who}: {note.title} found {found}x in {space}, not {expected}x")
    strangers = [t for t in titles if not t.startswith(f"{space}-")]
    if strangers:
        race.errors.append(f"{who}: searching {space} returned {strangers}")


async def session(race: Race, project: str, index: int) -> None:
    """One agent session: write a note, search for one of its space and one of any
    space, pause; for ``SECONDS`` from when its server is up."""
    who = f"{project}-{index}"
    rng = random.Random(who)
    async with Client(race.server(project)) as client:
        deadline = anyio.current_time() + SECONDS
        n = 0
        while anyio.current_time() < deadline:
            note = new_note(project, who, n, rng)
            out = await call(client, race, who, "ingest_text", text=note.text, title=note.title)
            if out:
                race.notes[project].append(note)
                race.written[who] += 1
            n += 1
            for space in (project, rng.choice(PROJECTS)):
                if race.notes[space]:
                    target = rng.choice(race.notes[space])
                    out = await call(client, race, who, "hybrid_search", query=target.text)
                    if out:
                        check_hits(race, who, project, target, out)
                        race.searches[who] += 1
            await anyio.sleep(rng.uniform(0, 2 * PAUSE))


async def update_loop(race: Race, stop: anyio.Event) -> None:
    """``memory-pipeline update-index`` again and again until the sessions are done."""
    while not stop.is_set():
        done = await anyio.run_process(
            [sys.executable, *CLI, "update-index"],
            env=race.env(),
            cwd=race.home.parent,
            check=False,
        )
        if done.returncode != 0:
            race.errors.append(f"update-index: exit {done.returncode}: {done.stderr.decode()}")
        race.updates += 1


async def race_sessions(race: Race) -> None:
    stop = anyio.Event()
    async with anyio.create_task_group() as sessions_and_updates:
        sessions_and_updates.start_soon(update_loop, race, stop)
        async with anyio.create_task_group() as sessions:
            for project in PROJECTS:
                for index in range(SESSIONS_PER_PROJECT):
                    sessions.start_soon(session, race, project, index)
        stop.set()


async def verify_space(race: Race, project: str) -> None:
    """Each note of the space searched for through a fresh session of that space (a note
    of another space returned would show up as a stranger)."""
    who = f"check-{project}"
    async with Client(race.server(project)) as client:
        for note in race.notes[project]:
            out = await call(client, race, who, "hybrid_search", query=note.text)
            check_hits(race, who, project, note, out)


def stored_documents(db: Path) -> Counter[tuple[str, str]]:
    """(space, title) of every stored document, read with sqlite3 directly."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return Counter(conn.execute("SELECT space, title FROM documents").fetchall())
    finally:
        conn.close()


async def test_six_sessions_in_three_projects_share_one_memory(tmp_path: Path) -> None:
    race = Race(tmp_path / "home")
    for project in PROJECTS:
        (tmp_path / project).mkdir()
    await race_sessions(race)
    print(
        f"\nnotes written per session: {dict(race.written)}\n"
        f"searches per session: {dict(race.searches)}\nupdate-index runs: {race.updates}"
    )
    assert race.errors == [], race.errors[:10]
    sessions = [f"{p}-{i}" for p in PROJECTS for i in range(SESSIONS_PER_PROJECT)]
    for who in sessions:
        assert race.written[who] >= MIN_NOTES, who
        assert race.searches[who] >= MIN_SEARCHES, who
    assert race.updates >= MIN_UPDATES

    final = subprocess.run(
        [sys.executable, *CLI, "update-index"],
        env=race.env(),
        cwd=race.home.parent,
        capture_output=True,
        text=True,
    )
    assert final.returncode == 0, final.stderr
    health = subprocess.run(
        [sys.executable, *CLI, "health"],
        env=race.env(),
        cwd=race.home.parent,
        capture_output=True,
        text=True,
    )
    assert health.returncode == 0, health.stdout + health.stderr

    async with anyio.create_task_group() as checks:
        for project in PROJECTS:
            checks.start_soon(verify_space, race, project)
    assert race.errors == [], race.errors[:10]
    memory = race.home / "data" / "memory-pipeline"
    assert [p.name for p in memory.glob("*.db")] == ["memory.db"]
    written = Counter((n.space, n.title) for notes in race.notes.values() for n in notes)
    assert stored_documents(memory / "memory.db") == written
