"""The helper behind ``recall --prompt``: one memory loaded once, answering each prompt.

``memory-pipeline recall --serve-prompts`` (started by the hooks, ``prompt_hook``) takes
the helper's lock, opens the memory as the settings say (store, index, embedding model),
warms the model with one search, then listens on its Unix socket: one JSON request a
connection (the prompt, the session, the space and the spaces it also reads), one JSON
answer (``output``: the hook's stdout, "" for nothing; ``why``; or ``error``). Requests
are answered one at a time. It exits after ``HYBRID_RAG_PROMPT_RECALL_IDLE`` seconds
without one, on SIGTERM, or when another helper already holds the lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_pipeline.cli.prompt_hook import MAX_MESSAGE, helper_paths, read_message
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.spaces import Spaces, check_space

if TYPE_CHECKING:
    from memory_pipeline.config import Settings
    from memory_pipeline.system import MemorySystem

#: How long a connected hook may take to send its request.
READ_SECONDS = 2.0


class Answering:
    """Answers requests from one memory, bound per request to the spaces it names."""

    def __init__(self, system: MemorySystem) -> None:
        self.system = system
        self._bound: dict[Spaces, MemorySystem] = {}
        self._unnoted: Callable[[], None] | None = None

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The answer to one request; what it hands over is noted by ``note`` (after the
        answer is sent: a write waiting on a busy database never delays a prompt)."""
        from memory_pipeline.cli.recall import hook_output
        from memory_pipeline.memory.prompt_recall import already_given, recall_for_prompt

        prompt, session = request.get("prompt"), request.get("session")
        if not isinstance(prompt, str):
            raise InvalidInputError("the request has no prompt")
        session = session if isinstance(session, str) and session else None
        memory = self._memory(request)
        settings = memory.settings.memory
        given = already_given(memory.store.handed_in_session(session)) if session else set()
        found = recall_for_prompt(
            memory,
            prompt,
            handed=given,
            session=session,
            budget=settings.prompt_recall_budget,
            floor=settings.prompt_recall_floor,
            bm25_floor=settings.prompt_recall_bm25_floor,
        )
        if not found.block:
            return {"output": "", "why": found.why}
        self._unnoted = lambda: memory.note_handed(
            "prompt", session=session, query=prompt, block=found.block, hits=found.hits
        )
        event = request.get("event")
        output = hook_output(found.block, event if isinstance(event, str) else "UserPromptSubmit")
        return {"output": output, "why": f"{len(found.hits)} chunk(s)"}

    def note(self) -> None:
        """Keep what the last answer handed over (``MemorySystem.note_handed``): the next
        prompt of the session is not given it again."""
        unnoted, self._unnoted = self._unnoted, None
        if unnoted is not None:
            unnoted()

    def _memory(self, request: Mapping[str, Any]) -> MemorySystem:
        space = check_space(request.get("space"))
        reads = request.get("read_spaces")
        if not isinstance(reads, list):
            raise InvalidInputError("the request's read_spaces is not a list")
        spaces = Spaces.bound(space, [check_space(s) for s in reads])
        if spaces not in self._bound:
            self._bound[spaces] = self.system.bound(spaces)
        return self._bound[spaces]

    def handle(self, conn: socket.socket) -> None:
        """One connection: its request, its answer; a failure is the answer's ``error``."""
        try:
            request = json.loads(read_message(conn, time.monotonic() + READ_SECONDS))
            if not isinstance(request, dict):
                raise InvalidInputError("the request is not a JSON object")
            reply = self.answer(request)
        except Exception as exc:  # the hook logs it; the helper goes on
            reply = {"error": str(exc) or exc.__class__.__name__}
        data = json.dumps(reply, ensure_ascii=False).encode("utf-8")
        if len(data) > MAX_MESSAGE:
            data = json.dumps({"error": "the answer was too long to send"}).encode("utf-8")
        conn.settimeout(READ_SECONDS)
        with contextlib.suppress(OSError):  # the hook gave up waiting and went on
            conn.sendall(data)
        conn.close()
        try:
            self.note()
        except Exception as exc:  # the chunk may come again in this session; nothing else
            print(
                f"recall --serve-prompts: what was handed over was not noted: {exc}",
                file=sys.stderr,
            )


def _system(settings: Settings) -> MemorySystem:
    """The memory as the settings say, written only to note what was handed over (a
    database that cannot be written still answers)."""
    from memory_pipeline.system import MemorySystem, Opening

    return MemorySystem(settings, opening=Opening.PREFER_WRITABLE, progress=False)


def no_memory(settings: Settings) -> bool:
    """No database file yet: nothing to recall, and none is made for it."""
    from memory_pipeline.store.urls import sqlite_file

    db_file = sqlite_file(settings.url)
    return db_file is not None and not db_file.exists()


def answer_here(request: Mapping[str, Any]) -> dict[str, Any]:
    """One request answered in this process, without a helper (seconds: the memory and the
    model are loaded for it); ``HYBRID_RAG_PROMPT_RECALL_HELPER=off``."""
    from memory_pipeline.config import Settings

    settings, _ = Settings.from_env().settled()
    if no_memory(settings):
        return {"output": "", "why": "no memory yet"}
    system = _system(settings)
    try:
        answering = Answering(system)
        reply = answering.answer(request)
        answering.note()
        return reply
    finally:
        system.close()


def serve(
    settings: Settings, env: Mapping[str, str], make: Callable[[Settings], MemorySystem] = _system
) -> int:
    """Serve prompts until idle for the settings' ``prompt_recall_idle`` seconds; 0 at
    once when another helper holds the lock."""
    from memory_pipeline import spool
    from memory_pipeline.listening import Terminated, stop_on_sigterm

    def log(line: str) -> None:
        spool.log(settings.capture_dir, f"recall --serve-prompts: {line}")

    sock, lock = helper_paths(env)
    with open(lock, "a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another helper serves this memory, or is starting to
        held.truncate(0)
        held.write(f"{os.getpid()}\n")  # who serves, for whoever must stop it
        held.flush()
        if no_memory(settings):
            log("no memory yet: not started")
            return 0
        stop_on_sigterm()
        system = make(settings)
        try:
            _warm(system)
            log(f"listening (pid {os.getpid()})")
            _listen(Answering(system), sock, settings.memory.prompt_recall_idle)
            log("idle, exiting")
        except (KeyboardInterrupt, Terminated):
            pass
        finally:
            sock.unlink(missing_ok=True)
            system.close()
    return 0


def _warm(system: MemorySystem) -> None:
    """One search, so the first prompt does not wait for the model and the index to load;
    one that fails (an empty memory) is the first prompt's to report."""
    from dataclasses import replace

    request = replace(system.settings.search_request(), record_access=False)
    with contextlib.suppress(Exception):
        system.query("what did we decide", request)


def _listen(answering: Answering, sock: Path, idle: float) -> None:
    sock.unlink(missing_ok=True)  # a helper that was killed left it behind
    previous = os.umask(0o177)
    try:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(sock))
    finally:
        os.umask(previous)
    with server:
        server.listen(16)
        server.settimeout(idle)
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return
            with conn:
                answering.handle(conn)
