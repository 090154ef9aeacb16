"""`memory-pipeline recall`: print what this project's memory holds that matters now.

Run by hand it prints the block (``memory.recall``) for the bound space. As Claude Code's
``SessionStart`` hook (``--hook``) it reads the hook's JSON payload on stdin, takes the
space of the project at the payload's ``cwd`` as capture takes it (``spaces.project_space``,
unless ``--space`` or ``HYBRID_RAG_SPACE`` is set), and prints the block as the hook's
``additionalContext``; when captured sessions cannot be stored (the worker cannot run,
some were set aside) one line says so to the user (``systemMessage``).
A hook must never stand in a session's way: whatever goes wrong is one line on stderr
and exit 0 (Claude Code shows it to the user, the session starts as usual).

Only a store is opened, read-only: no embedding model, no index.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_pipeline.cli.flags import given_storage, positive_int
from memory_pipeline.config import Settings, variable
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.spaces import project_space

MakeSettings = Callable[[argparse.Namespace], Settings]
HOOK_EVENT = "SessionStart"


def hook_payload(text: str) -> dict[str, Any]:
    """The hook's JSON payload; one without an absolute ``cwd`` is refused (the project
    cannot be told from a relative one)."""
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"the hook payload on stdin is not JSON ({exc.msg} at line {exc.lineno})"
        ) from exc
    except RecursionError as exc:
        raise InvalidInputError(
            "the hook payload on stdin is JSON too deeply nested to read"
        ) from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("cwd"), str):
        raise InvalidInputError('the hook payload on stdin is not an object with a "cwd" string')
    if not Path(payload["cwd"]).is_absolute():
        raise InvalidInputError(
            f"the hook payload's cwd {payload['cwd']!r} is not an absolute path"
        )
    return payload


def hook_output(block: str, event: str, notice: str = "") -> str:
    """The block as Claude Code takes a hook's added context: ``hookSpecificOutput``,
    fenced (``hygiene.fence``) so that the session, once captured, does not store it again.
    A ``notice`` for the user (``spool.Status.notice``) goes in ``systemMessage``, which
    Claude Code shows them, and heads the context, so the agent can speak of it too."""
    from memory_pipeline.hygiene.private import fence

    text = "\n\n".join(part for part in (notice, block) if part)
    added = fence(text) if text else text
    output: dict[str, Any] = {
        "hookSpecificOutput": {"hookEventName": event, "additionalContext": added}
    }
    if notice:
        output["systemMessage"] = notice
    return json.dumps(output, ensure_ascii=False)


def _recall(settings: Settings, budget: int) -> str:
    import datetime as dt

    from memory_pipeline.memory.recall import recall_block
    from memory_pipeline.store import Store
    from memory_pipeline.store.urls import sqlite_file

    db_file = sqlite_file(settings.url)
    if db_file is not None and not db_file.exists():
        return ""  # no memory yet: nothing to recall, and none is made for it
    store = Store(settings.url, spaces=settings.spaces(), read_only=True)
    try:
        return recall_block(store, budget=budget, now=dt.datetime.now(dt.UTC))
    finally:
        store.close()


def _note_handed(settings: Settings, session: Any, block: str) -> None:
    """Keep the block the hook hands over, for the memory's pages (``memory-pipeline ui``);
    a memory that cannot be written keeps nothing, and nothing here fails the hook."""
    from memory_pipeline.store import Store
    from memory_pipeline.store.urls import sqlite_file

    db_file = sqlite_file(settings.url)
    if db_file is not None and not os.access(db_file, os.W_OK):
        return
    try:
        store = Store(settings.url, spaces=settings.spaces())
        try:
            store.record_handed(
                "recall", session=session if isinstance(session, str) else None, block=block
            )
        finally:
            store.close()
    except Exception as exc:
        print(f"memory-pipeline recall: the block was not noted: {exc}", file=sys.stderr)


def _catch_up(settings: Settings) -> str:
    """Start capture's worker when sessions wait in the spool: one that ended while
    nothing could store it is stored as the next session starts (docs/capture.md). The
    line the user should see about the capture folder, or "" (``spool.Status.notice``)."""
    from memory_pipeline import spool
    from memory_pipeline.cli.capture import start_worker

    folder = settings.capture_dir
    state = spool.status(folder)
    if state.waiting:
        start_worker(folder, os.environ)
    return state.notice()


def _storage_flags(args: argparse.Namespace) -> dict[str, str]:
    """The storage flags given, as the variables the hook and its helper read (the spaces
    go with each prompt, ``prompt_hook.request_of``)."""
    given = given_storage(args)
    return {
        variable(field): str(value)
        for field, (_, value) in given.items()
        if value is not None and field not in ("space", "read_spaces")
    }


def _start_prompt_helper(settings: Settings, env: dict[str, str]) -> None:
    """Start the helper that answers ``recall --prompt``, so the session's first prompt
    finds it warm (``cli/prompt_hook.py``); not when prompt recall or its helper is off."""
    from memory_pipeline.cli.prompt_hook import start_helper

    if settings.memory.prompt_recall and settings.memory.prompt_recall_helper:
        try:
            start_helper(env)
        except Exception as exc:
            print(
                f"memory-pipeline recall: the prompt helper did not start: {exc}", file=sys.stderr
            )


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
    make_settings: MakeSettings,
) -> None:
    """Add the ``recall`` subcommand."""

    def cmd_recall(args: argparse.Namespace) -> int:
        if args.prompt:  # reached here only with other flags (``cli/main.py``): the same hook
            from memory_pipeline.cli.prompt_hook import hook

            env = {**os.environ, **_storage_flags(args)}
            return hook(sys.stdin, env, args.space, args.read_space or [])
        if args.serve_prompts:
            from memory_pipeline.cli.prompt_helper import serve

            return serve(make_settings(args), os.environ)
        if not args.hook:
            settings = make_settings(args)
            block = _recall(settings, args.budget or settings.memory.recall_budget)
            print(block, end="")
            return 0
        try:
            payload = hook_payload(sys.stdin.read())
            if not (args.space or os.environ.get(variable("space"))):
                args.space = project_space(Path(payload["cwd"])).name
            settings = make_settings(args)
            notice = _catch_up(settings)
            block = _recall(settings, args.budget or settings.memory.recall_budget)
        except Exception as exc:  # a hook never breaks the session: say why, exit 0
            print(f"memory-pipeline recall: nothing recalled: {exc}", file=sys.stderr)
            return 0
        if block:
            _note_handed(settings, payload.get("session_id"), block)
        if args.start_prompt_helper:
            _start_prompt_helper(settings, {**os.environ, **_storage_flags(args)})
        if block or notice:
            event = payload.get("hook_event_name")
            print(hook_output(block, event if isinstance(event, str) else HOOK_EVENT, notice))
        return 0

    p = sub.add_parser(
        "recall",
        parents=parents,
        help="print what this project's memory holds that matters now (a SessionStart hook)",
        description="Print a short block of the space's principles and important notes and "
        "its latest sessions, within a token budget; nothing when there is nothing to say. "
        "Reads the store (no model, no index); as a hook it also notes the block it "
        "handed over, for the memory's pages (memory-pipeline ui).",
    )
    p.add_argument(
        "--budget",
        type=positive_int,
        help="the block's size in tokens, estimated as UTF-8 bytes / 3 "
        "(default: HYBRID_RAG_RECALL_BUDGET, else 1500)",
    )
    p.add_argument(
        "--hook",
        action="store_true",
        help="run as Claude Code's SessionStart hook: read its JSON payload on stdin, take "
        "the space of the project at its cwd, as capture does (unless --space or "
        "HYBRID_RAG_SPACE), print the block as "
        "hookSpecificOutput.additionalContext, and exit 0 whatever fails",
    )
    p.add_argument(
        "--start-prompt-helper",
        action="store_true",
        help="with --hook: also start the helper that answers --prompt, so that the "
        "session's first prompt finds the memory loaded (unless HYBRID_RAG_PROMPT_RECALL "
        "or HYBRID_RAG_PROMPT_RECALL_HELPER is off)",
    )
    p.add_argument(
        "--prompt",
        action="store_true",
        help="run as the UserPromptSubmit hook of Claude Code or Codex: read its JSON payload "
        "on stdin, search the prompt in the project's spaces and print the few chunks that "
        "clear HYBRID_RAG_PROMPT_RECALL_FLOOR, within HYBRID_RAG_PROMPT_RECALL_BUDGET tokens, "
        "as hookSpecificOutput.additionalContext; nothing for a prompt no person typed, a "
        "short one or one nothing matches, nor for a chunk this session was given already. "
        "Exits 0 whatever fails (why goes to the capture log); off with "
        "HYBRID_RAG_PROMPT_RECALL=off",
    )
    p.add_argument(
        "--serve-prompts",
        action="store_true",
        help="run the helper that answers --prompt (the hooks start it): the memory loaded "
        "once, answering on a Unix socket until HYBRID_RAG_PROMPT_RECALL_IDLE seconds pass "
        "without a prompt",
    )
    p.set_defaults(func=cmd_recall, reads_only=True)
