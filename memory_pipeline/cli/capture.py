"""``memory-pipeline capture``: a Claude Code or Codex hook that brings a session into the memory.

Claude Code runs it on ``SessionEnd`` and ``PreCompact``, Codex on ``Stop`` (after every
turn), with the hook's JSON on stdin. It must return at once and never break the session,
so it only records the session as pending in the spool (``memory_pipeline/spool.py``),
starts a detached worker and exits 0, printing nothing on stdout (Codex takes a Stop
hook's stdout as its answer); anything it cannot use (another event, no transcript) is a
line in the capture log. A payload that is not a JSON object is one line on stderr and
exit 1, which Claude Code shows and does not block on (2 would block a compaction). The
worker is ``capture --drain``: it holds the spool's lock, stores every pending session
through its source's path (``sources.given``: a Codex rollout by the Codex source, else
Claude Code's; a session captured again replaces its one document) and updates the index
once.

This module is what the hook imports: the standard library and the spool only. The
store, the settings and the models are imported by ``drain`` alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from memory_pipeline import spool
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.locations import DB_PATH_VARIABLE, capture_dir, db_from_env
from memory_pipeline.spaces import (
    SPACE_VARIABLE,
    ProjectSpace,
    check_space,
    project_space,
    repository_root,
)

#: The hook events whose transcript is stored (Claude Code's two, Codex's after each turn);
#: every other event is let pass.
EVENTS = ("SessionEnd", "PreCompact", "Stop")
#: Claude Code shows a hook's stderr for exit codes other than 0 and 2 and goes on.
NOT_BLOCKING = 1
WORKER = ("-m", "memory_pipeline.cli", "capture", "--drain")
#: The space a session goes to when --space is not given (``hook_space``).
SPACE_DEFAULT = (
    f"{SPACE_VARIABLE}, else the space of the project the hook payload's cwd is in "
    "(the one its .mcp.json names, else its repository root's)"
)


def hook_space(cwd: str, flag: str | None, env: Mapping[str, str]) -> ProjectSpace:
    """``--space``, else the environment's space, else the space of ``cwd``'s project
    (``spaces.project_space``: the one setup gives it)."""
    if flag:
        return ProjectSpace(check_space(flag), repository_root(Path(cwd)), "--space")
    if env.get(SPACE_VARIABLE):
        name = check_space(env[SPACE_VARIABLE])
        return ProjectSpace(name, repository_root(Path(cwd)), SPACE_VARIABLE)
    return project_space(Path(cwd))


def hook(
    stdin: IO[str],
    env: Mapping[str, str],
    space: str | None = None,
) -> int:
    """Record the session a hook payload names as pending and start the worker."""
    try:
        folder = capture_dir(db_from_env(env))
    except InvalidInputError as exc:  # no folder to log to: the user sees it
        print(f"memory-pipeline capture: {exc}; nothing captured", file=sys.stderr)
        return NOT_BLOCKING
    text = stdin.read()
    try:
        payload: Any = json.loads(text)
    except ValueError as exc:
        why = f"the hook input is not JSON ({exc})"
    except RecursionError:
        why = "the hook input is JSON nested too deeply to read"
    else:
        why = "" if isinstance(payload, dict) else "the hook input is not a JSON object"
    if why:
        message = f"memory-pipeline capture: {why}; nothing captured"
        print(message, file=sys.stderr)
        spool.log(folder, message)
        return NOT_BLOCKING
    event = payload.get("hook_event_name")
    transcript = payload.get("transcript_path")
    if event not in EVENTS:
        spool.log(folder, f"skipped: event {event!r} is not one of {', '.join(EVENTS)}")
        return 0
    if not isinstance(transcript, str) or not transcript:
        spool.log(folder, f"skipped: {event} without a transcript_path")
        return 0
    given = payload.get("cwd")
    cwd = given if isinstance(given, str) and given else os.getcwd()
    try:
        chosen = hook_space(cwd, space, env)
    except InvalidInputError as exc:
        message = f"memory-pipeline capture: {exc}; nothing captured"
        print(message, file=sys.stderr)
        spool.log(folder, message)
        return NOT_BLOCKING
    path = Path(transcript).expanduser()
    session = payload.get("session_id")
    capture = spool.Capture(
        session_id=session if isinstance(session, str) and session else path.stem,
        transcript=os.path.abspath(path),
        space=chosen.name,
        cwd=cwd,
        event=event,
        root=str(chosen.root),
    )
    try:
        spool.write_pending(folder, capture)
        start_worker(folder, env)
    except OSError as exc:
        message = f"memory-pipeline capture: cannot record the session in {folder}: {exc}"
        print(message, file=sys.stderr)
        spool.log(folder, message)
        return NOT_BLOCKING
    spool.log(folder, f"pending: {event} {capture.session_id} → space {chosen.name}")
    return 0


def start_worker(folder: Path, env: Mapping[str, str]) -> None:
    """``capture --drain`` in its own session, with ``env`` (``start_detached``)."""
    start_detached(WORKER, folder, env)


def start_detached(args: Sequence[str], folder: Path, env: Mapping[str, str]) -> None:
    """This interpreter with ``args``, in its own session, away from the hook's pipes
    (Claude Code waits for the hook's output to close, not for what it started), its
    output in the log of the spool ``folder``, with ``env``."""
    with open(folder / spool.LOG_NAME, "a", encoding="utf-8") as log:
        subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
            env=dict(env),
        )


def main(argv: Sequence[str]) -> int:
    """The hook's own entry: ``capture [--space NAME]``, parsed without the full CLI."""
    parser = argparse.ArgumentParser(prog="memory-pipeline capture", add_help=False)
    parser.add_argument("--space")
    args, rest = parser.parse_known_args(argv)
    if rest:  # --drain, --help, storage flags: the full command line
        from memory_pipeline.cli import commands

        return commands.main(["capture", *argv])
    return hook(sys.stdin, os.environ, args.space)


def drain(folder: Path, make_system: Callable[[], Any]) -> int:
    """Store every pending capture, holding the spool's lock; 0 when none is left.

    Another worker holding the lock is not waited for: it looks at the spool again after
    letting go of the lock, so it sees any capture written before this one tried. A
    worker that cannot run (a model that does not load, a bad setting) records why
    (``spool.note_failure``) before it fails; one that ends well removes the record."""
    try:
        done = _drain(folder, make_system)
    except Exception as exc:  # the worker could not run: the next SessionStart says so
        reason = str(exc) or exc.__class__.__name__
        spool.note_failure(folder, reason)
        spool.log(folder, f"the worker could not run: {reason}")
        raise
    if done is None:
        print("another worker is storing the pending captures")
        return 0
    stored, refused = done
    spool.clear_failure(folder)
    print(
        f"{stored} captured sessions stored or current, {refused} set aside (with their reasons "
        f"in {folder / spool.FAILED_DIR}); none pending"
    )
    return 0


def _drain(folder: Path, make_system: Callable[[], Any]) -> tuple[int, int] | None:
    """``drain``'s work: (stored, set aside), or None when another worker holds the lock."""
    from memory_pipeline.sources.given import given_config, session_kind, store_files
    from memory_pipeline.sources.ledger import open_ledger
    from memory_pipeline.sources.sources_file import SourceKind
    from memory_pipeline.store.rows import now_utc as now

    system = None
    stored = refused = 0
    try:
        while spool.waiting(folder):
            with spool.worker_lock(folder) as held:
                if not held:
                    spool.log(folder, "another worker holds the lock; it takes these too")
                    return None
                while claimed := spool.claim(folder):
                    system = system or make_system()
                    groups: dict[tuple[str, SourceKind], list[tuple[Path, spool.Capture]]] = {}
                    for path in claimed:
                        try:
                            capture = spool.read_capture(path)
                        except InvalidInputError as exc:
                            spool.log(folder, f"dropped: {exc}")
                            path.unlink(missing_ok=True)
                            continue
                        why = spool.examine(capture)
                        if why is not None:  # refused before it could hold up the others
                            spool.set_aside(folder, path, capture, why)
                            spool.log(folder, f"set aside: {why}: {capture.session_id}")
                            refused += 1
                            continue
                        kind = session_kind(Path(capture.transcript))
                        groups.setdefault((capture.space, kind), []).append((path, capture))
                    for (space, kind), items in groups.items():
                        files = [Path(c.transcript) for _, c in items]
                        config = given_config(kind, files, space, folder / spool.LEDGER_NAME)
                        with open_ledger(usable_ledger(folder)) as ledger:
                            report = store_files(system, config, files, ledger)
                        for path, capture in items:
                            why = report.failed.get(capture.transcript) or spool.examine(capture)
                            state = f"set aside: {why}" if why else "stored"
                            spool.log(folder, f"{state}: {capture.session_id} (space {space})")
                            refused += bool(why)
                            stored += not why
                            if why:  # refused for good: kept with its reason, out of the queue
                                spool.set_aside(folder, path, capture, why)
                                continue
                            if capture.root:
                                system.store.note_capture(space, capture.root, now())
                            path.unlink(missing_ok=True)
                if system is not None and system.index_due():
                    r = system.update_index()
                    spool.log(folder, f"index version {r.version}: +{r.added} -{r.removed}")
    finally:
        if system is not None:
            system.close()
    return stored, refused


def usable_ledger(folder: Path) -> Path:
    """The capture ledger's path, an unreadable ledger set aside first (renamed beside it
    and logged): it only remembers what each transcript produced, the database what is
    stored, so a new one loses nothing and no state file can stall the worker."""
    import datetime as dt

    from memory_pipeline.sources.ledger import read_ledger

    path = folder / spool.LEDGER_NAME
    try:
        read_ledger(path)
    except InvalidInputError as exc:
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        aside = path.with_name(f"{path.name}.unreadable-{stamp}")
        os.replace(path, aside)
        spool.log(folder, f"set aside the unreadable ledger as {aside.name} ({exc})")
    return path


def status_json(folder: Path, state: spool.Status) -> dict[str, Any]:
    def waiting(path: Path) -> dict[str, Any]:
        try:
            capture: dict[str, Any] = asdict(spool.read_capture(path))
        except InvalidInputError as exc:
            capture = {"error": str(exc)}
        claimed = path.suffix == spool.CLAIMED
        return {"name": path.stem, "state": "claimed" if claimed else "pending", **capture}

    return {
        "folder": str(folder),
        "counts": state.counts,
        "waiting": [waiting(p) for p in state.waiting],
        "set_aside": [
            {
                "name": k.name,
                **asdict(k.capture),
                "reason": k.reason,
                "set_aside_at": k.set_aside_at,
            }
            for k in state.kept
        ],
        "ledgers_set_aside": [p.name for p in state.ledgers],
        "worker_failure": state.failure,
        "notice": state.notice(),
    }


def render_status(folder: Path, state: spool.Status) -> str:
    """``capture --status`` as text: what waits, what was set aside and why, what to run."""
    data = status_json(folder, state)
    lines = [f"capture folder: {folder}"]
    if state.failure is not None:
        lines += [
            f"the worker could not run ({state.failure['at']}): {state.failure['reason']}",
            "  fix that, then `memory-pipeline capture --drain` stores what waits "
            "(its log: capture.log)",
        ]
    lines.append(f"waiting to be stored: {len(state.waiting)}")
    for item in data["waiting"]:
        where = f"space {item['space']}" if "space" in item else item["error"]
        lines.append(f"  {item['name']} ({item['state']}, {where})")
    lines.append(f"set aside: {len(state.kept)}")
    for kept in state.kept:
        lines += [
            f"  {kept.name} (space {kept.capture.space or '?'}, {kept.set_aside_at or '?'})",
            f"    why: {kept.reason}",
            f"    transcript: {kept.capture.transcript or '?'}",
        ]
    for ledger in state.ledgers:
        lines.append(f"ledger set aside: {ledger.name} (unreadable; a new one was begun)")
    if state.kept or state.ledgers:
        lines.append(
            "  `memory-pipeline capture --retry NAME|all` stores set-aside captures again "
            "(once their reason is fixed); `--drop NAME|all` forgets them"
        )
    if not data["notice"]:
        lines.append("nothing needs you")
    return "\n".join(lines)


def chosen(state: spool.Status, names: Sequence[str]) -> tuple[list[spool.Kept], list[Path]]:
    """The set-aside captures and ledgers ``names`` pick (each a capture's name or session
    id, a ledger's file name, or ``all``); a name that picks nothing is refused before
    anything changes."""
    if "all" in names:
        return list(state.kept), list(state.ledgers)
    kept = [k for k in state.kept if k.name in names or k.capture.session_id in names]
    ledgers = [p for p in state.ledgers if p.name in names]
    picked = {k.name for k in kept} | {k.capture.session_id for k in kept}
    unknown = [n for n in names if n not in picked | {p.name for p in ledgers}]
    if unknown:
        raise InvalidInputError(
            f"nothing set aside is named {', '.join(map(repr, unknown))}; nothing was changed "
            "(`memory-pipeline capture --status` lists the names, or give all)"
        )
    return kept, ledgers


def retry(folder: Path, names: Sequence[str], make_system: Callable[[], Any]) -> int:
    """Put set-aside captures back in the queue, then store what waits in the foreground:
    a reason that still holds sets them aside again."""
    kept, _ = chosen(spool.status(folder), names)
    for item in kept:
        spool.write_pending(folder, item.capture)
        item.path.unlink(missing_ok=True)
        spool.log(folder, f"retried: {item.capture.session_id}")
    print(f"{len(kept)} set-aside captures put back in the queue")
    return drain(folder, make_system)


def drop(folder: Path, names: Sequence[str]) -> int:
    """Forget set-aside captures and ledgers (their transcripts are not touched)."""
    kept, ledgers = chosen(spool.status(folder), names)
    for path in [k.path for k in kept] + ledgers:
        path.unlink(missing_ok=True)
        spool.log(folder, f"dropped: {path.name}")
    print(f"dropped {len(kept)} set-aside captures and {len(ledgers)} set-aside ledgers")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
    make_system: Callable[[argparse.Namespace], Any],
) -> None:
    """Add ``capture`` (the hook; ``--drain`` runs the worker in the foreground)."""

    def cmd_capture(args: argparse.Namespace) -> int:
        env = dict(os.environ)
        if args.db:  # the worker the hook starts stores where this was told, too
            env[DB_PATH_VARIABLE] = str(Path(args.db).resolve())
        folder = capture_dir(db_from_env(env))
        if args.status:
            state = spool.status(folder)
            if args.json:
                print(json.dumps(status_json(folder, state), ensure_ascii=False, indent=2))
            else:
                print(render_status(folder, state))
            return 0
        if args.json:
            raise InvalidInputError("--json goes with --status")
        if args.retry:
            return retry(folder, args.retry, lambda: make_system(args))
        if args.drop:
            return drop(folder, args.drop)
        if args.drain:
            return drain(folder, lambda: make_system(args))
        return hook(sys.stdin, env, args.space)

    p = sub.add_parser(
        "capture",
        parents=parents,
        help="Claude Code / Codex hook: store the session on stdin's hook payload (returns "
        "at once)",
        description="Read a Claude Code hook payload (SessionEnd, PreCompact) or a Codex one "
        "(Stop, after every turn) on stdin, record its session as pending and start a worker "
        "that stores it in the space of the project at the payload's cwd (or --space); a "
        "session captured again replaces its one document. --drain stores every pending "
        "session now, in the foreground; --status lists what waits, what was set aside "
        "and why, and whether the worker could run; --retry and --drop act on what was "
        "set aside.",
    )
    what = p.add_mutually_exclusive_group()
    what.add_argument(
        "--drain",
        action="store_true",
        help="store every pending capture now (what the started worker does)",
    )
    what.add_argument(
        "--status",
        action="store_true",
        help="list the captures waiting and those set aside with their reasons, and the "
        "worker's last failure; changes nothing",
    )
    what.add_argument(
        "--retry",
        nargs="+",
        metavar="NAME",
        help="put set-aside captures back in the queue (names or session ids from --status, "
        "or all) and store them now",
    )
    what.add_argument(
        "--drop",
        nargs="+",
        metavar="NAME",
        help="forget set-aside captures and ledgers (names from --status, or all); "
        "transcripts are not touched",
    )
    p.add_argument("--json", action="store_true", help="--status as JSON")
    p.set_defaults(func=cmd_capture)
