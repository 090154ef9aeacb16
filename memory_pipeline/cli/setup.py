"""`memory-pipeline setup claude-code`: give a project the memory server in one command.

Run in a project folder, it adds one server entry to the project's ``.mcp.json``
(other servers and keys stay as they are), optionally the Claude Code subagents that
use it, and prints the same server as a ``claude mcp add`` line and as a Codex
``config.toml`` block. The entry names no storage unless a flag did: every project
then shares the user's one memory, each writing to its own space (by default named
after the project: ``spaces.project_space``) and reading others only when ``--read-space``
says so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from memory_pipeline.config import Settings, variable
from memory_pipeline.durable import replace_text
from memory_pipeline.errors import InvalidInputError
from memory_pipeline.spaces import (
    MCP_FILE,
    SERVER_NAME,
    derived_space,
    marked_space,
    project_space,
)

AGENTS_DIR = Path(".claude") / "agents"
SETTINGS_FILE = Path(".claude") / "settings.json"
#: Seconds the client gives each hook before it stops waiting, declared on every hook (Claude
#: Code's own defaults are 600 s for most events and about 1.5 s for SessionEnd). Prompt recall
#: gives up by itself after about 2 s; session-start recall opens the store and may drain the
#: capture spool; capture only records the session and starts a worker, so it returns at once.
HOOK_TIMEOUT = {
    "SessionStart": 10,
    "UserPromptSubmit": 5,
    "PreCompact": 5,
    "SessionEnd": 5,
    "Stop": 5,
}
#: The model is unpacked once into the cache; a server must never wait on the network.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
CLIENTS = ("claude-code",)
#: The Claude Code events whose session ``capture`` stores.
CAPTURE_EVENTS = ("PreCompact", "SessionEnd")
#: What the server writes to and reads when --space / --read-space is not given (the
#: environment's HYBRID_RAG_SPACE and HYBRID_RAG_READ_SPACES are not written into it).
SPACE_DEFAULT = (
    "the space this project's .mcp.json already names, else its repository root's name "
    "and a mark of the root's path"
)
READ_SPACES_DEFAULT = "none"


@dataclass(frozen=True)
class ServerEntry:
    """How a client starts the server: a command, its arguments, an environment."""

    command: str
    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "stdio",
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
        }

    def claude_mcp_add(self, name: str) -> str:
        """The ``claude mcp add`` line that writes the same entry."""
        words = ["claude", "mcp", "add", name, "--scope", "project"]
        for key, value in self.env.items():
            words += ["-e", f"{key}={value}"]
        words += ["--", self.command, *self.args]
        return " ".join(shlex.quote(w) for w in words)

    def codex_toml(self, name: str) -> str:
        """The same server as a Codex CLI ``config.toml`` table (JSON strings are TOML's)."""
        env = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in self.env.items())
        return "\n".join(
            [
                f"[mcp_servers.{name}]",
                f"command = {json.dumps(self.command)}",
                f"args = [{', '.join(json.dumps(a) for a in self.args)}]",
                f"env = {{ {env} }}",
            ]
        )


@dataclass(frozen=True)
class Hook:
    """One command hook as setup writes it: what it runs and how long the client waits."""

    command: str
    timeout: int

    def to_json(self) -> dict[str, Any]:
        return {"type": "command", "command": self.command, "timeout": self.timeout}


@dataclass(frozen=True)
class AgentFiles:
    """What writing the subagents did, file by file."""

    written: tuple[Path, ...] = ()
    unchanged: tuple[Path, ...] = ()
    skipped: tuple[Path, ...] = ()  # the user's own version, kept (no --force)


def _console_script() -> Path | None:
    script = Path(sys.executable).parent / "memory-pipeline"
    return script if script.is_file() else None


def server_command() -> tuple[str, ...]:
    """The installed console script by absolute path, else this interpreter's ``-m serving``."""
    script = _console_script()
    if script is not None:
        return (str(script), "serve")
    return (sys.executable, "-m", "serving")


def cli_command(*words: str) -> str:
    """A command line of this command, as a hook runs it: the installed console script by
    absolute path (as the server's), else this interpreter's ``-m memory_pipeline.cli``."""
    script = _console_script()
    head = (str(script),) if script is not None else (sys.executable, "-m", "memory_pipeline.cli")
    return shlex.join([*head, *words])


def hook_commands(
    space: str | None, read_spaces: Iterable[str] = (), capture_on: Iterable[str] = CAPTURE_EVENTS
) -> dict[str, Hook]:
    """Hook event → the hook it runs: recall at a session's start and with every prompt,
    capture on each of ``capture_on`` (Claude Code: as a session ends or before it is
    compacted). ``space`` when setup was given one; recall also reads ``read_spaces``, as
    the server does."""
    chosen = ["--space", space] if space else []
    reads = [w for s in read_spaces if s != space for w in ("--read-space", s)]
    commands = {
        "SessionStart": cli_command("recall", "--hook", *chosen, *reads),
        "UserPromptSubmit": cli_command("recall", "--prompt", *chosen, *reads),
        **{event: cli_command("capture", *chosen) for event in capture_on},
    }
    return {event: Hook(command, HOOK_TIMEOUT[event]) for event, command in commands.items()}


#: What a refused file's message ends with: setup writes nothing unless it can write exactly.
LEFT = "it was left as it was and nothing was written: fix it, then run setup again"


class _NotKept(ValueError):
    """A JSON file holds what could not be written back as it was written."""


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotKept(f"holds the number {text}, beyond what JSON readers can keep")
    return value


def _no_constant(name: str) -> Any:
    raise _NotKept(f"holds {name}, which is not JSON")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _NotKept(f'holds the key "{key}" twice in one object, and only one could be kept')
        data[key] = value
    return data


def _read_object(path: Path) -> dict[str, Any]:
    """``path``'s JSON object ({} when absent or blank), through a symlink; a file that
    is not one, or that could not be written back as it was written (a number out of
    range, NaN or Infinity, a key twice, text that is not UTF-8), is refused and left as
    it was. A lone surrogate is refused by ``_json_text``, which makes every text setup
    writes before the first is written."""
    if not path.exists():
        return {}
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"{path} cannot be read ({exc.strerror}); {LEFT}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text (byte {exc.start}); {LEFT}") from exc
    try:
        data = (
            json.loads(
                text, parse_float=_finite, parse_constant=_no_constant, object_pairs_hook=_unique
            )
            if text.strip()
            else {}
        )
    except _NotKept as exc:
        raise InvalidInputError(f"{path} {exc}; {LEFT}") from exc
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {LEFT}"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path} is not a JSON object; {LEFT}")
    return data


def _json_text(path: Path, data: dict[str, Any]) -> str:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end].encode("unicode_escape").decode()
        raise InvalidInputError(
            f"{path} holds a lone surrogate ({bad}) in a string, which cannot be written as "
            f"UTF-8; {LEFT}"
        ) from exc
    return text


def own_hook(command: str) -> bool:
    """A hook command that runs this tool's capture or recall, from any install and with
    any flags: ``…/memory-pipeline capture``, ``python -m memory_pipeline.cli recall``."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    for i, word in enumerate(words[:-1]):
        ours = Path(word).name == "memory-pipeline" or (
            word == "memory_pipeline.cli" and i > 0 and words[i - 1] == "-m"
        )
        if ours:
            return words[i + 1] in ("capture", "recall")
    return False


def merged_settings_json(path: Path, wanted: Mapping[str, Hook]) -> tuple[str, dict[str, str]]:
    """``path``'s text with the hook of ``wanted`` for each of its events, every other
    hook and setting kept; and each event's state: "added", "already there" (a second
    run changes nothing) or "replaced an earlier one" (this tool's own hooks of another
    install, other flags or another timeout are taken out, so a session is never
    captured twice)."""
    data = _read_object(path)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise InvalidInputError(f'{path}: "hooks" is not an object of lists; {LEFT}')
    states = {}
    for event, want in wanted.items():
        entry = want.to_json()
        present = replaced = False
        groups = []
        for group in hooks.get(event, []):
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list):
                kept = []
                for hook in inner:
                    run = hook.get("command") if isinstance(hook, dict) else None
                    if not (isinstance(run, str) and own_hook(run)):
                        kept.append(hook)
                    elif hook == entry and not present:
                        present = True
                        kept.append(hook)
                    else:
                        replaced = True
                if inner and not kept:
                    continue  # a group that held only this tool's earlier hooks
                group["hooks"] = kept
            groups.append(group)
        if not present:
            groups.append({"hooks": [entry]})
        hooks[event] = groups
        states[event] = (
            "replaced an earlier one" if replaced else "already there" if present else "added"
        )
    return _json_text(path, data), states


def server_entry(space: str, read_spaces: Iterable[str], storage: Mapping[str, str]) -> ServerEntry:
    """The entry for a server writing to ``space``; ``storage`` holds only the settings the
    caller gave (field name → value), so the rest stays each setting's default."""
    env = {variable("space"): space}
    also = [s for s in dict.fromkeys(read_spaces) if s != space]
    if also:
        env[variable("read_spaces")] = ",".join(also)
    env.update({variable(name): value for name, value in storage.items()})
    env.update(OFFLINE)
    command, *args = server_command()
    return ServerEntry(command, tuple(args), env)


def merged_mcp_json(path: Path, name: str, entry: ServerEntry) -> str:
    """``path``'s text with the server ``name`` set to ``entry`` and everything else kept;
    a file that is not a JSON object with an object ``mcpServers`` is refused."""
    data = _read_object(path)
    if not isinstance(data.get("mcpServers", {}), dict):
        raise InvalidInputError(
            f'{path} is not an object with an object "mcpServers"; it was left as it '
            "was: fix it, then run setup again"
        )
    data.setdefault("mcpServers", {})[name] = entry.to_json()
    return _json_text(path, data)


def write_checked(writes: list[tuple[Path, str]]) -> None:
    """Write each file whole, through a symlink (a dotfiles link stays a link), once every
    one was checked writable: a refusal changes nothing."""
    targets = [(path.resolve() if path.is_symlink() else path, text) for path, text in writes]
    for target, _ in targets:
        folder = target.parent
        while not folder.exists():
            folder = folder.parent
        if not folder.is_dir():
            raise InvalidInputError(
                f"{folder} is not a folder, so {target} cannot be written; nothing was written"
            )
        if not os.access(folder, os.W_OK | os.X_OK):
            raise InvalidInputError(f"{folder} may not be written; nothing was written")
    done: list[Path] = []
    for target, text in targets:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            replace_text(target, text)
        except OSError as exc:
            written = f"; written already: {', '.join(map(str, done))}" if done else ""
            raise InvalidInputError(
                f"{target} cannot be written ({exc.strerror}){written or '; nothing was written'}"
            ) from exc
        done.append(target)


def shipped_agents() -> dict[str, str]:
    """The Claude Code subagents this package ships: file name → text."""
    folder = resources.files("memory_pipeline") / "claude_agents"
    return {
        f.name: f.read_text(encoding="utf-8")
        for f in sorted(folder.iterdir(), key=lambda f: f.name)
        if f.name.endswith(".md")
    }


def write_agents(folder: Path, *, force: bool) -> AgentFiles:
    """Write the shipped subagents into ``folder``; a file that differs is the user's and
    is kept unless ``force``."""
    written, unchanged, skipped = [], [], []
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in shipped_agents().items():
        path = folder / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            unchanged.append(path)
        elif current is not None and not force:
            skipped.append(path)
        else:
            replace_text(path, text)
            written.append(path)
    return AgentFiles(tuple(written), tuple(unchanged), tuple(skipped))


def _storage(args: argparse.Namespace) -> dict[str, str]:
    """The storage settings given as flags, paths made absolute (a client may start the
    server in another folder)."""
    given: dict[str, str] = {}
    if args.db:
        given["db_path"] = str(Path(args.db).resolve())
    if args.index:
        given["index_path"] = str(Path(args.index).resolve())
    if args.database_url:
        given["database_url"] = args.database_url
    if args.backend:
        given["backend"] = args.backend
    if args.model:
        model = Path(args.model)
        given["model"] = str(model.resolve()) if model.exists() else args.model
    return given


def folder_name_space(root: Path) -> str | None:
    """The space setup gave ``root`` before spaces were marked (its folder's name alone)."""
    try:
        return derived_space(root)
    except InvalidInputError:
        return None


def cmd_setup(args: argparse.Namespace) -> int:
    project = Path.cwd()
    # Checked as every command checks them: a refused name is named by its flag.
    chosen = Settings().with_flags(
        {
            "space": ("--space", args.space or None),
            "read_spaces": ("--read-space", tuple(args.read_space) if args.read_space else None),
        }
    )
    found = project_space(project)
    space = chosen.space if args.space else found.name
    read = list(chosen.read_spaces)
    entry = server_entry(space, read, _storage(args))
    writes: list[tuple[Path, str]] = []  # everything is checked before the first write
    states: dict[str, str] = {}
    commands = hook_commands(space if args.space else None, read)
    if args.hooks:
        hooks_file = project / SETTINGS_FILE
        settings_text, states = merged_settings_json(hooks_file, commands)
        if any(state != "already there" for state in states.values()):
            writes.append((hooks_file, settings_text))
    mcp = project / MCP_FILE
    text = merged_mcp_json(mcp, SERVER_NAME, entry)
    mcp_current = mcp.exists() and mcp.read_text(encoding="utf-8") == text
    if not mcp_current:
        writes.append((mcp, text))
    write_checked(writes)
    state = "already set up" if mcp_current else "set up"
    print(f"{MCP_FILE}: server {SERVER_NAME!r} {state} (space {space!r})")
    print(f"project root: {found.root}" + ("" if args.space else f" (space: {found.how})"))
    if not args.space and space == folder_name_space(found.root):
        marked = marked_space(found.root)
        print(
            f"note: the space {space!r} is named after the folder alone (as setup named "
            "spaces before): another project in a folder of that name that names it too "
            "shares its memory. To give this project its own: memory-pipeline spaces "
            f"--merge {space} {marked} --apply, then setup claude-code --space {marked}"
        )
    for event, hook_state in states.items():
        hook = commands[event]
        print(f"{SETTINGS_FILE}: hook {event} → {hook.command} ({hook.timeout} s, {hook_state})")
    if args.agents:
        done = write_agents(project / AGENTS_DIR, force=args.force)
        for verb, paths in (("wrote", done.written), ("unchanged", done.unchanged)):
            for path in paths:
                print(f"{verb} {path.relative_to(project)}")
        for path in done.skipped:
            print(
                f"skipped {path.relative_to(project)}: it differs from the shipped one "
                "(pass --force to replace it)",
                file=sys.stderr,
            )
    print("\nThe same from Claude Code's command line:\n")
    print(entry.claude_mcp_add(SERVER_NAME))
    print(
        "\nFor the Codex CLI (~/.codex/config.toml, or .codex/config.toml in a trusted project):\n"
    )
    print(entry.codex_toml(SERVER_NAME))
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    """Add the ``setup`` subcommand (it writes configuration only: no store, no model)."""
    p = sub.add_parser(
        "setup",
        parents=parents,
        help="register the memory server in this project (.mcp.json, optional subagents)",
        description="Add the memory server to this folder's .mcp.json (other servers are "
        "kept) and print the same as a `claude mcp add` line and a Codex config.toml block. "
        "The space defaults to the one this project's .mcp.json names, else its repository "
        "root's name and a mark of the root's path (printed); storage is written only when given as "
        "--db / --index / --database-url.",
    )
    p.add_argument("client", choices=CLIENTS, help="the agent to set up")
    p.add_argument(
        "--agents",
        action="store_true",
        help=f"also write the shipped Claude Code subagents into {AGENTS_DIR}/",
    )
    p.add_argument(
        "--hooks",
        action="store_true",
        help=f"also add Claude Code hooks to {SETTINGS_FILE}: capture each session as it "
        "ends or is compacted, recall at its start and with every prompt (other hooks are "
        "kept)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --agents: replace subagent files that differ from the shipped ones",
    )
    p.set_defaults(func=cmd_setup)
