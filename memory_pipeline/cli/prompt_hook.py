"""``memory-pipeline recall --prompt``: the hook that hands memories over with each prompt.

Claude Code and Codex run it on ``UserPromptSubmit`` with the hook's JSON on stdin
(``session_id``, ``cwd``, ``prompt``, ``hook_event_name``) and add what it prints as
``hookSpecificOutput.additionalContext`` to what the model reads. It runs before every
prompt, so it must answer in a blink and never stand in the way: whatever goes wrong
(no memory, a missing space, a locked or broken database, a helper that does not
answer in time) is a line in the capture log, nothing on stdout, and exit 0.

The search itself needs the store, the index and the embedding model, which take
seconds to load. A helper process loads them once and answers over a Unix socket
(``memory-pipeline recall --serve-prompts``, ``cli/prompt_helper.py``); the hook is this
module, which imports the standard library and the spool's helpers only, asks the helper
and prints its answer. No helper running: the hook starts one (the session-start hook
already did, most of the time) and this prompt gets nothing. The helper serves one
memory and configuration (its socket is named after the ``HYBRID_RAG_*`` settings, the
database and the install), any space, and exits after ``HYBRID_RAG_PROMPT_RECALL_IDLE`` seconds
without a prompt. ``HYBRID_RAG_PROMPT_RECALL_HELPER=off`` searches in the hook's own
process instead (seconds per prompt: for a machine that must not keep one running).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import socket
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from memory_pipeline import spool
from memory_pipeline.cli.capture import hook_space, start_detached
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.locations import capture_dir, db_from_env

SWITCH = "HYBRID_RAG_PROMPT_RECALL"
HELPER_SWITCH = "HYBRID_RAG_PROMPT_RECALL_HELPER"
#: Values of a switch that turn it off (as the settings read a boolean).
OFF = frozenset({"0", "off", "false", "no", "n", "f"})
#: Settings that do not change what the helper is: the hook sends them with each prompt.
PER_PROMPT = frozenset({"HYBRID_RAG_SPACE", "HYBRID_RAG_READ_SPACES", SWITCH})
#: How long the hook waits for the helper's answer before it gives up on this prompt.
WAIT_SECONDS = 2.0
#: The longest request or answer read from the socket.
MAX_MESSAGE = 1 << 20
HELPER = ("-m", "memory_pipeline.cli", "recall", "--serve-prompts")
EVENT = "UserPromptSubmit"


def switched_off(env: Mapping[str, str], name: str = SWITCH) -> bool:
    return env.get(name, "").strip().lower() in OFF


def helper_paths(env: Mapping[str, str]) -> tuple[Path, Path]:
    """The helper's socket and lock file for the memory and settings of ``env``: in the
    user's runtime folder (``$XDG_RUNTIME_DIR``), else a folder of their own under the
    temporary one, which must be theirs alone."""
    settings = sorted(
        (k, v) for k, v in env.items() if k.startswith("HYBRID_RAG_") and k not in PER_PROMPT
    )
    db = os.path.abspath(db_from_env(env))
    installed = os.stat(__file__).st_mtime_ns  # an upgrade gets a helper of its own
    key = json.dumps([settings, db, sys.executable, installed]).encode("utf-8")
    name = "recall-" + hashlib.sha256(key).hexdigest()[:16]
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and os.path.isdir(runtime):
        folder = Path(runtime) / "memory-pipeline"
    else:
        folder = Path(tempfile.gettempdir()) / f"memory-pipeline-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    st = folder.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise InvalidInputError(
            f"{folder} is not a folder only you can use (owner and mode 700); remove it "
            "and the next prompt makes it again"
        )
    return folder / f"{name}.sock", folder / f"{name}.lock"


def ask(sock: Path, request: Mapping[str, Any], wait: float) -> dict[str, Any] | None:
    """The helper's answer to ``request``; None when no helper listens at ``sock``.
    An answer that does not come within ``wait`` seconds raises ``TimeoutError``."""
    deadline = time.monotonic() + wait
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(wait)
        failed = conn.connect_ex(str(sock))
        if failed in (errno.ENOENT, errno.ECONNREFUSED):
            return None
        if failed:
            raise OSError(failed, f"cannot reach the helper at {sock}: {os.strerror(failed)}")
        conn.sendall(json.dumps(request).encode("utf-8") + b"\n")
        conn.shutdown(socket.SHUT_WR)
        answer = read_message(conn, deadline)
    reply = json.loads(answer)
    if not isinstance(reply, dict):
        raise InvalidInputError("the helper's answer is not a JSON object")
    return reply


def read_message(conn: socket.socket, deadline: float) -> bytes:
    """Bytes until the peer closes its side, at most ``MAX_MESSAGE``, by ``deadline``."""
    parts: list[bytes] = []
    size = 0
    while True:
        conn.settimeout(max(deadline - time.monotonic(), 0.001))
        part = conn.recv(65536)
        if not part:
            return b"".join(parts)
        size += len(part)
        if size > MAX_MESSAGE:
            raise InvalidInputError(f"a message over {MAX_MESSAGE} bytes on the socket")
        parts.append(part)


def helper_starting(lock: Path) -> bool:
    """Whether a helper holds ``lock`` (it does from before it loads until it exits)."""
    with open(lock, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


def start_helper(env: Mapping[str, str]) -> bool:
    """Start the helper for ``env``'s memory unless one runs or is starting; whether this
    call started it. Detached like capture's worker: the hook does not wait for it."""
    _, lock = helper_paths(env)
    if helper_starting(lock):
        return False
    folder = capture_dir(db_from_env(env))
    folder.mkdir(parents=True, exist_ok=True)
    start_detached(HELPER, folder, env)
    return True


def request_of(
    payload: Mapping[str, Any], space: str, read_spaces: Sequence[str]
) -> dict[str, Any]:
    """What the helper is asked: the prompt, where to look, and which session asks."""
    event = payload.get("hook_event_name")
    session = payload.get("session_id")
    return {
        "prompt": payload.get("prompt"),
        "session": session if isinstance(session, str) and session else None,
        "event": event if isinstance(event, str) and event else EVENT,
        "space": space,
        "read_spaces": list(read_spaces),
    }


def hook(stdin: IO[str], env: Mapping[str, str], space: str | None, reads: Sequence[str]) -> int:
    """Answer one ``UserPromptSubmit`` payload: the helper's output on stdout, or nothing."""
    from memory_pipeline.memory.prompt_recall import skip_reason

    if switched_off(env):
        return 0
    try:
        folder = capture_dir(db_from_env(env))
    except InvalidInputError as exc:  # no folder to log to: the user sees it
        print(f"memory-pipeline recall --prompt: {exc}", file=sys.stderr)
        return 0
    try:
        payload = json.loads(stdin.read())
        if not isinstance(payload, dict):
            raise InvalidInputError("the hook input is not a JSON object")
        if skip_reason(payload.get("prompt")):
            return 0  # not a person's question: nothing to look for, nothing to say
        if not env.get("HYBRID_RAG_DATABASE_URL") and not db_from_env(env).exists():
            return 0  # no memory yet: nothing to recall
        cwd = payload.get("cwd")
        chosen = hook_space(cwd if isinstance(cwd, str) and cwd else os.getcwd(), space, env)
        read_env = env.get("HYBRID_RAG_READ_SPACES", "")
        read = list(reads) or [s.strip() for s in read_env.split(",") if s.strip()]
        request = request_of(payload, chosen.name, read)
        if switched_off(env, HELPER_SWITCH):
            from memory_pipeline.cli.prompt_helper import answer_here

            reply = answer_here(request)
        else:
            asked = ask(helper_paths(env)[0], request, WAIT_SECONDS)
            if asked is None:
                started = start_helper(env)
                spool.log(
                    folder,
                    "recall --prompt: nothing recalled for this prompt: "
                    + ("started the helper" if started else "the helper is starting"),
                )
                return 0
            reply = asked
    except Exception as exc:  # a hook never stands in the way: say why in the log, exit 0
        spool.log(folder, f"recall --prompt: nothing recalled: {exc or exc.__class__.__name__}")
        return 0
    if reply.get("error"):
        spool.log(folder, f"recall --prompt: nothing recalled: {reply['error']}")
    elif reply.get("output"):
        print(reply["output"])
    return 0


def main(argv: Sequence[str]) -> int:
    """The hook's own entry: ``recall --prompt [--space NAME] [--read-space NAME …]``,
    parsed without the full command line (``--help`` and other flags go to it)."""
    parser = argparse.ArgumentParser(prog="memory-pipeline recall", add_help=False)
    parser.add_argument("--prompt", action="store_true")
    parser.add_argument("--space")
    parser.add_argument("--read-space", action="append", default=[])
    args, rest = parser.parse_known_args(argv)
    if rest or not args.prompt:
        from memory_pipeline.cli import commands

        return commands.main(["recall", *argv])
    with contextlib.suppress(BrokenPipeError):
        return hook(sys.stdin, os.environ, args.space, args.read_space)
    return 0
