"""Writing a user's settings files exactly: read whole, changed only in this tool's own
entries, checked before the first write, written through links (``setup``).

A file that could not be written back as it was written is refused before anything is
written, with a message naming it and what to do (``LEFT``).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from memory_pipeline.durable import replace_text
from memory_pipeline.errors import InvalidInputError


@dataclass(frozen=True)
class Hook:
    """One command hook as setup writes it: what it runs and how long the client waits."""

    command: str
    timeout: int

    def to_json(self) -> dict[str, Any]:
        return {"type": "command", "command": self.command, "timeout": self.timeout}


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


def _read_text(path: Path) -> str:
    """``path``'s UTF-8 text, through a symlink; one that cannot be read is refused."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"{path} cannot be read ({exc.strerror}); {LEFT}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 text (byte {exc.start}); {LEFT}") from exc


def read_object(path: Path) -> dict[str, Any]:
    """``path``'s JSON object ({} when absent or blank), through a symlink; a file that
    is not one, or that could not be written back as it was written (a number out of
    range, NaN or Infinity, a key twice, text that is not UTF-8), is refused and left as
    it was. A lone surrogate is refused by ``json_text``, which makes every text setup
    writes before the first is written."""
    if not path.exists():
        return {}
    text = _read_text(path)
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


def json_text(path: Path, data: dict[str, Any]) -> str:
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


def read_toml(path: Path) -> tomlkit.TOMLDocument:
    """``path``'s TOML as an editable document (empty when absent); a file that is not
    TOML, or that could not be written back byte for byte, is refused and left as it was."""
    if not path.exists():
        return tomlkit.document()
    text = _read_text(path)
    try:
        tomllib.loads(text)  # the strict reader: what tomlkit lets pass, Codex may not
        doc = tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, TOMLKitError) as exc:
        raise InvalidInputError(f"{path} is not valid TOML ({exc}); {LEFT}") from exc
    if doc.as_string() != text:
        raise InvalidInputError(f"{path} could not be written back exactly as it is; {LEFT}")
    return doc


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
    hook and setting kept (``merge_hooks``); and each event's state."""
    data = read_object(path)
    states = merge_hooks(data, wanted, path)
    return json_text(path, data), states


def merge_hooks(data: dict[str, Any], wanted: Mapping[str, Hook], path: Path) -> dict[str, str]:
    """Put the hook of ``wanted`` for each of its events into ``data``'s ``"hooks"`` (Claude
    Code's and Codex's shape: event → groups of ``{matcher?, hooks: [...]}``), every other
    hook kept as it is; each event's state: "added", "already there" (a second run changes
    nothing) or "replaced an earlier one" (this tool's own hooks of another install, other
    flags or another timeout are taken out, so a session is never captured twice; a group
    left empty goes too). A new hook gets a group of its own, after the others."""
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
    return states


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
