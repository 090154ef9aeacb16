"""`memory-pipeline setup claude-code|codex`: give an agent the memory server in one command.

``claude-code``, run in a project folder, adds one server entry to the project's
``.mcp.json`` (other servers and keys stay as they are), optionally the Claude Code
subagents that use it and its hooks, and prints the same server as a ``claude mcp add``
line and as a Codex ``config.toml`` block. ``codex`` writes the server, and optionally the
hooks, into the Codex CLI's own files (``codex_setup``). The entry names no storage unless
a flag did: every project then shares the user's one memory, each writing to its own
space (by default named after the project: ``spaces.project_space``) and reading others
only when ``--read-space`` says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from memory_pipeline.cli import codex_setup
from memory_pipeline.cli.setup_files import (
    Hook,
    json_text,
    merged_settings_json,
    read_object,
    write_checked,
)
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
CLIENTS = ("claude-code", "codex")
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

    def codex_table(self) -> dict[str, Any]:
        """The entry as a Codex ``[mcp_servers.<name>]`` table holds it."""
        return {"command": self.command, "args": list(self.args), "env": dict(self.env)}

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
    """Hook event → the hook it runs: recall at a session's start (starting the helper that
    answers prompts, so the first one finds it loaded) and with every prompt,
    capture on each of ``capture_on`` (Claude Code: as a session ends or before it is
    compacted). ``space`` when setup was given one; recall also reads ``read_spaces``, as
    the server does."""
    chosen = ["--space", space] if space else []
    reads = [w for s in read_spaces if s != space for w in ("--read-space", s)]
    commands = {
        "SessionStart": cli_command("recall", "--hook", "--start-prompt-helper", *chosen, *reads),
        "UserPromptSubmit": cli_command("recall", "--prompt", *chosen, *reads),
        **{event: cli_command("capture", *chosen) for event in capture_on},
    }
    return {event: Hook(command, HOOK_TIMEOUT[event]) for event, command in commands.items()}


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
    data = read_object(path)
    if not isinstance(data.get("mcpServers", {}), dict):
        raise InvalidInputError(
            f'{path} is not an object with an object "mcpServers"; it was left as it '
            "was: fix it, then run setup again"
        )
    data.setdefault("mcpServers", {})[name] = entry.to_json()
    return json_text(path, data)


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
    if args.client == "codex" and (args.agents or args.force):
        raise InvalidInputError(
            "--agents writes Claude Code subagents: run setup claude-code --agents for them"
        )
    found = project_space(project)
    space = chosen.space if args.space else found.name
    read = list(chosen.read_spaces)
    entry = server_entry(space, read, _storage(args))
    hook_space = space if args.space else None
    if args.client == "codex":
        setup_codex(entry, space, hook_space, read, hooks=args.hooks)
    else:
        setup_claude_code(project, entry, space, hook_space, read, args)
    print(f"project root: {found.root}" + ("" if args.space else f" (space: {found.how})"))
    if not args.space and space == folder_name_space(found.root):
        marked = marked_space(found.root)
        print(
            f"note: the space {space!r} is named after the folder alone (as setup named "
            "spaces before): another project in a folder of that name that names it too "
            "shares its memory. To give this project its own: memory-pipeline spaces "
            f"--merge {space} {marked} --apply, then setup {args.client} --space {marked}"
        )
    if args.client == "codex":
        print(
            f"note: Codex starts the server of {codex_setup.CONFIG_FILE} in every session, "
            f"whatever its folder: it writes to the space {space!r}. The hooks take each "
            "session's space from its folder, as for Claude Code."
        )
        return 0
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
    print("\nFor the Codex CLI: memory-pipeline setup codex [--hooks] writes it, or by hand:\n")
    print(entry.codex_toml(SERVER_NAME))
    return 0


def _changed(path: Path, text: str) -> bool:
    return not (path.exists() and path.read_bytes() == text.encode("utf-8"))


def setup_claude_code(
    project: Path,
    entry: ServerEntry,
    space: str,
    hook_space: str | None,
    read: list[str],
    args: argparse.Namespace,
) -> None:
    """The server in the project's .mcp.json and, with --hooks, its hooks in
    .claude/settings.json; everything checked before the first write."""
    writes: list[tuple[Path, str]] = []
    states: dict[str, str] = {}
    commands = hook_commands(hook_space, read)
    if args.hooks:
        hooks_file = project / SETTINGS_FILE
        settings_text, states = merged_settings_json(hooks_file, commands)
        if any(state != "already there" for state in states.values()):
            writes.append((hooks_file, settings_text))
    mcp = project / MCP_FILE
    text = merged_mcp_json(mcp, SERVER_NAME, entry)
    mcp_changed = _changed(mcp, text)
    if mcp_changed:
        writes.append((mcp, text))
    write_checked(writes)
    state = "set up" if mcp_changed else "already set up"
    print(f"{MCP_FILE}: server {SERVER_NAME!r} {state} (space {space!r})")
    _print_hooks(SETTINGS_FILE, commands, states)


def _print_hooks(where: Path, commands: Mapping[str, Hook], states: Mapping[str, str]) -> None:
    """One line per hook setup wrote to ``where``: its command, timeout and state."""
    for event, state in states.items():
        hook = commands[event]
        print(f"{where}: hook {event} → {hook.command} ({hook.timeout} s, {state})")


def setup_codex(
    entry: ServerEntry, space: str, hook_space: str | None, read: list[str], *, hooks: bool
) -> None:
    """The server in ``$CODEX_HOME/config.toml`` and, with ``hooks``, the hooks in its
    hooks.json, trusted in config.toml; everything checked before the first write."""
    home = codex_setup.codex_home(os.environ)
    config = home / codex_setup.CONFIG_FILE
    plan = None
    commands = hook_commands(hook_space, read, capture_on=codex_setup.CAPTURE_EVENTS)
    writes: list[tuple[Path, str]] = []
    if hooks:
        hooks_file = home / codex_setup.HOOKS_FILE
        # Codex names its hooks by its home's real path (a linked ~/.codex is resolved).
        key_file = home.resolve() / codex_setup.HOOKS_FILE
        plan = codex_setup.merged_hooks_json(hooks_file, key_file, commands)
        if _changed(hooks_file, plan.text):
            writes.append((hooks_file, plan.text))
    text = codex_setup.merged_config_toml(config, SERVER_NAME, entry.codex_table(), plan)
    config_changed = _changed(config, text)
    if config_changed:
        writes.append((config, text))
    write_checked(writes)
    state = "set up" if config_changed else "already set up"
    print(f"{config}: server {SERVER_NAME!r} {state} (space {space!r})")
    if plan is None:
        return
    _print_hooks(hooks_file, commands, plan.states)
    print(f"{config}: the {len(plan.trusted)} hooks above trusted (Codex skips a hook until it is)")
    if plan.moved:
        print(
            f"{config}: the trust of {len(plan.moved)} other hooks moved with them "
            "(an earlier hook of this tool before them was taken out)"
        )


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    """Add the ``setup`` subcommand (it writes configuration only: no store, no model)."""
    p = sub.add_parser(
        "setup",
        parents=parents,
        help="register the memory server for Claude Code (this project's .mcp.json) or Codex "
        "(its config.toml), optionally with hooks",
        description="claude-code: add the memory server to this folder's .mcp.json (other "
        "servers are kept) and print the same as a `claude mcp add` line and a Codex "
        "config.toml block. codex: write the server into $CODEX_HOME/config.toml (~/.codex "
        "by default; every other setting, table and comment is kept) and, with --hooks, "
        "Codex's hooks into hooks.json beside it, trusted in config.toml. "
        "The space defaults to the one this project's .mcp.json names, else its repository "
        "root's name and a mark of the root's path (printed); storage is written only when "
        "given as --db / --index / --database-url. A second run changes nothing; a file "
        "that could not be kept as written is refused and nothing is written.",
    )
    p.add_argument(
        "client",
        choices=CLIENTS,
        help="the agent to set up: claude-code (this project) or codex (the user's Codex CLI)",
    )
    p.add_argument(
        "--agents",
        action="store_true",
        help=f"also write the shipped Claude Code subagents into {AGENTS_DIR}/",
    )
    p.add_argument(
        "--hooks",
        action="store_true",
        help=f"also add hooks (other hooks are kept): for claude-code to {SETTINGS_FILE}, "
        "capturing each session as it ends or is compacted; for codex to "
        f"$CODEX_HOME/{codex_setup.HOOKS_FILE}, capturing the session after every turn; for "
        "both, recall at a session's start and with every prompt",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --agents: replace subagent files that differ from the shipped ones",
    )
    p.set_defaults(func=cmd_setup)
