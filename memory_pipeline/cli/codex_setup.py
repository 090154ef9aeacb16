"""`memory-pipeline setup codex`: the server, and the hooks, in the Codex CLI's own files.

Codex reads its MCP servers from ``$CODEX_HOME/config.toml`` (``~/.codex`` by default) and
its hooks from ``$CODEX_HOME/hooks.json``, in Claude Code's shape. It runs a user's hook only
once the hook is trusted: ``[hooks.state."<hooks.json>:<event>:<group>:<handler>"]`` in
config.toml holding the hook's ``trusted_hash``, which any edit of the hook (its timeout
too) changes. Setup writes the trust of the hooks it wrote, and only those; another tool's
hook that moves because an earlier hook of this one was taken out keeps its trust under its
new place. config.toml is edited in place: every other table, key and comment stays byte
for byte.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import InlineTable, Table

from memory_pipeline.cli.setup_files import (
    LEFT,
    Hook,
    json_text,
    merge_hooks,
    read_object,
    read_toml,
)
from memory_pipeline.errors import InvalidInputError

CODEX_HOME_VARIABLE = "CODEX_HOME"
CONFIG_FILE = "config.toml"
HOOKS_FILE = "hooks.json"
#: Stop runs after every turn, once the turn is in the rollout, so the session is captured
#: turn by turn (each capture replaces its document) and nothing waits for its end: Codex
#: cuts a SessionEnd hook after at most 3 s, and a session left without closing has none.
CAPTURE_EVENTS = ("Stop",)
#: The events of ours whose group matcher Codex counts in a hook's identity (it ignores the
#: matcher of UserPromptSubmit and Stop).
MATCHED_EVENTS = ("SessionStart",)

Place = tuple[str, int, int]  # event, group index, handler index


def codex_home(env: Mapping[str, str]) -> Path:
    """``$CODEX_HOME``, else ``~/.codex`` (where Codex itself looks)."""
    given = env.get(CODEX_HOME_VARIABLE)
    return Path(given).expanduser() if given else Path.home() / ".codex"


def event_label(event: str) -> str:
    """An event as Codex names it in a hook's key and hash: ``UserPromptSubmit`` →
    ``user_prompt_submit``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def trust_hash(event: str, hook: Hook, matcher: str | None = None) -> str:
    """The hash Codex (0.171) gives a command hook, the ``currentHash`` of its ``hooks/list``:
    SHA-256 of the compact, key-sorted JSON of the hook's normalised identity (its event,
    its group's matcher where the event has one, and the one handler with ``async``
    spelled out), as ``command_hook_hash`` in codex-rs/hooks/src/engine/discovery.rs and
    ``version_for_toml`` in codex-rs/config/src/fingerprint.rs compute it."""
    identity: dict[str, Any] = {
        "event_name": event_label(event),
        "hooks": [{**hook.to_json(), "async": False}],
    }
    if event in MATCHED_EVENTS and matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def hook_key(hooks_file: Path, place: Place) -> str:
    """The key of the hook at ``place`` in ``[hooks.state]``: the hooks file as Codex names
    it (its home's real path), the event, the group and the handler."""
    event, group, handler = place
    return f"{hooks_file}:{event_label(event)}:{group}:{handler}"


def _handlers(hooks: Mapping[str, Any], events: Iterable[str]) -> Iterator[tuple[Place, Any, Any]]:
    """Each handler of ``events``: its place, its group and itself."""
    for event in events:
        for g, group in enumerate(hooks.get(event, [])):
            inner = group.get("hooks") if isinstance(group, dict) else None
            for h, hook in enumerate(inner if isinstance(inner, list) else []):
                yield (event, g, h), group, hook


def _places(hooks: Mapping[str, Any], events: Iterable[str]) -> dict[int, Place]:
    """Where each hook object of ``events`` sits (by identity)."""
    return {id(hook): place for place, _, hook in _handlers(hooks, events)}


@dataclass(frozen=True)
class HooksPlan:
    """What merging the hooks does: the new hooks.json, each event's state, the trust each
    of our hooks needs (key → hash), and the trust keys of other hooks that moved."""

    text: str
    states: dict[str, str]
    trusted: dict[str, str]
    moved: dict[str, str]


def merged_hooks_json(path: Path, key_file: Path, wanted: Mapping[str, Hook]) -> HooksPlan:
    """``path`` (Codex's hooks.json) with ``wanted`` merged in as for Claude Code
    (``setup_files.merge_hooks``); hooks are keyed under ``key_file``."""
    data = read_object(path)
    raw = data.get("hooks", {})
    before = _places(raw, wanted) if isinstance(raw, dict) else {}
    states = merge_hooks(data, wanted, path)
    hooks = data["hooks"]
    trusted, ours = {}, set()
    for place, group, item in _handlers(hooks, wanted):
        hook = wanted[place[0]]
        if item == hook.to_json():
            ours.add(id(item))
            matcher = group.get("matcher")
            matcher = matcher if isinstance(matcher, str) else None
            trusted[hook_key(key_file, place)] = trust_hash(place[0], hook, matcher)
    moved = {
        hook_key(key_file, before[i]): hook_key(key_file, place)
        for i, place in _places(hooks, wanted).items()
        if i in before and before[i] != place and i not in ours
    }
    return HooksPlan(json_text(path, data), states, trusted, moved)


def _part(parent: Any, key: str, path: Path, where: str) -> Any:
    """``parent[key]`` when it is a table, None when absent; refused when something else."""
    if parent is None or key not in parent:
        return None
    found = parent[key]
    if not isinstance(found, dict):
        raise InvalidInputError(f"{path}: {where} is not a table; {LEFT}")
    return found


def _server_table(server: Mapping[str, Any], *, inline: bool) -> Any:
    table = tomlkit.inline_table() if inline else tomlkit.table()
    for key, value in server.items():
        if isinstance(value, Mapping):
            nested = tomlkit.inline_table()
            nested.update(value)
            value = nested
        table[key] = value
    return table


def _super(**tables: Any) -> Any:
    found = tomlkit.table(is_super_table=True)
    found.update(tables)
    return found


def merged_config_toml(
    path: Path, name: str, server: Mapping[str, Any], plan: HooksPlan | None
) -> str:
    """``path`` (Codex's config.toml) with the server ``name`` set to ``server`` (command,
    args, env) and, given a hooks plan, the trust of our hooks written and moved hooks'
    trust moved with them. A table already in the file is changed where it is; a new one
    is added at the end, so every other table keeps its place and comments. A part already
    as wanted is not touched: a second run changes nothing."""
    doc = read_toml(path)
    added: dict[str, Any] = {}
    servers = _part(doc, "mcp_servers", path, "mcp_servers")
    current = None if servers is None else servers.get(name)
    if not (isinstance(current, Table | InlineTable) and current.unwrap() == dict(server)):
        inline = isinstance(servers, InlineTable)
        if current is not None or inline:
            servers[name] = _server_table(server, inline=inline)
        else:
            added["mcp_servers"] = _super(**{name: _server_table(server, inline=False)})
    if plan is not None:
        state = _part(_part(doc, "hooks", path, "hooks"), "state", path, "hooks.state")
        held: dict[str, Any] = {} if state is None else state
        carried = {new: held.get(old) for old, new in plan.moved.items()}
        for key in {*plan.moved, *plan.moved.values()}:
            held.pop(key, None)  # a moved hook's trust goes with it, or none where none was
        new_state = {new: value.unwrap() for new, value in carried.items() if value is not None}
        for key, digest in plan.trusted.items():
            entry = held.get(key)
            if isinstance(entry, dict) and key not in new_state:
                if entry.get("trusted_hash") != digest:
                    entry["trusted_hash"] = digest
            else:
                new_state[key] = {**new_state.get(key, {}), "trusted_hash": digest}
        if new_state:
            tables = {key: _server_table(value, inline=False) for key, value in new_state.items()}
            added["hooks"] = _super(state=_super(**tables))
    text = doc.as_string()
    if added:
        tail = tomlkit.document()
        tail.update(added)
        gap = "\n" if text.strip() else ""
        text = (text if not text or text.endswith("\n") else text + "\n") + gap + tail.as_string()
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(
            f"{path}: its mcp_servers or hooks table is written inline, where setup cannot add "
            f"to it exactly ({exc}); {LEFT}"
        ) from exc
    return text
