"""The sources file: which folders feed the memory, and what every file under them is.

A YAML file lists *roots*. Each root is a folder, the glob patterns that pick its
files, the kind of source those files are (plain documents or conversation
exports) and the metadata every file under it gets: ``knowledge_type`` (DESIGN §3:
decided by where a source came from, never guessed from its text), a default
``importance`` and tags. Relative paths resolve against the sources file's folder.

.. code-block:: yaml

    state: sources-state.json        # optional; the sync ledger (default: beside this file)
    roots:
      - name: principles
        path: sources/principles
        knowledge_type: principle
        importance: 0.9
        tags: [design]
      - name: claude-code
        path: ~/.claude/projects
        kind: claude_code             # one Markdown document per session, as experiment
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from pathlib import Path, PurePosixPath

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.metadata import KnowledgeType
from memory_pipeline.spaces import check_space

DEFAULT_STATE_NAME = "sources-state.json"


class SourceKind(StrEnum):
    """What the files under a root are; each kind has its own reader (see ``sync``)."""

    FILES = "files"  # documents ingested as they are (md, txt, pdf, html)
    CLAUDE_AI = "claude_ai"  # a Claude.ai data export's conversations.json
    CLAUDE_CODE = "claude_code"  # Claude Code session logs, one *.jsonl per session
    TRANSCRIPT = "transcript"  # plain transcripts, *.json / *.jsonl (docs/conversations.md)
    CODEX = "codex"  # Codex CLI rollouts, ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl
    CHATGPT = "chatgpt"  # a ChatGPT data export's conversations.json


DEFAULT_PATTERNS: dict[SourceKind, tuple[str, ...]] = {
    SourceKind.FILES: ("**/*.md", "**/*.markdown", "**/*.txt", "**/*.pdf", "**/*.html", "**/*.htm"),
    SourceKind.CLAUDE_AI: ("**/conversations.json",),
    SourceKind.CLAUDE_CODE: ("**/*.jsonl",),
    SourceKind.TRANSCRIPT: ("**/*.json", "**/*.jsonl"),
    SourceKind.CODEX: ("**/rollout-*.jsonl",),
    SourceKind.CHATGPT: ("**/conversations.json",),
}
# Sub-agent sessions (agent-*.jsonl) repeat work their parent session already records.
DEFAULT_EXCLUDE: dict[SourceKind, tuple[str, ...]] = {
    SourceKind.FILES: (),
    SourceKind.CLAUDE_AI: (),
    SourceKind.CLAUDE_CODE: ("**/agent-*.jsonl",),
    SourceKind.TRANSCRIPT: (),
    SourceKind.CODEX: (),
    SourceKind.CHATGPT: (),
}
# Conversations are a record of work done: experiment knowledge unless a root says otherwise.
DEFAULT_KNOWLEDGE_TYPE: dict[SourceKind, KnowledgeType | None] = {
    SourceKind.FILES: None,
    SourceKind.CLAUDE_AI: KnowledgeType.EXPERIMENT,
    SourceKind.CLAUDE_CODE: KnowledgeType.EXPERIMENT,
    SourceKind.TRANSCRIPT: KnowledgeType.EXPERIMENT,
    SourceKind.CODEX: KnowledgeType.EXPERIMENT,
    SourceKind.CHATGPT: KnowledgeType.EXPERIMENT,
}


class RootSpec(BaseModel):
    """One root as written in the sources file."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    path: str
    kind: SourceKind = SourceKind.FILES
    patterns: list[str] | None = None
    exclude: list[str] | None = None
    knowledge_type: KnowledgeType | None = None
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list)
    # The memory space its files go to (default: the space the pipeline is bound to).
    space: str | None = None

    @field_validator("space")
    @classmethod
    def _space(cls, value: str | None) -> str | None:
        return None if value is None else check_space(value)

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        cleaned = [t.strip() for t in value]
        if any(not t for t in cleaned):
            raise ValueError("every tag must be a non-empty string")
        return list(dict.fromkeys(cleaned))


class SourcesFileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: str | None = None
    roots: list[RootSpec] = Field(min_length=1)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob over '/'-separated relative paths: ``**/`` spans folders, ``*`` stays in one."""
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


@dataclass(frozen=True)
class SourceRoot:
    """A root with its folder resolved and its defaults filled in."""

    name: str
    path: Path
    kind: SourceKind
    patterns: tuple[str, ...]
    exclude: tuple[str, ...]
    knowledge_type: KnowledgeType | None
    importance: float | None
    tags: tuple[str, ...]
    space: str | None = None  # None: the space the memory is bound to

    @cached_property
    def _include(self) -> tuple[re.Pattern[str], ...]:
        return tuple(glob_regex(p) for p in self.patterns)

    @cached_property
    def _exclude(self) -> tuple[re.Pattern[str], ...]:
        return tuple(glob_regex(p) for p in self.exclude)

    def relative(self, path: Path) -> PurePosixPath | None:
        """``path`` relative to this root, or None when it lies elsewhere."""
        try:
            return PurePosixPath(path.relative_to(self.path).as_posix())
        except ValueError:
            return None

    def matches(self, path: Path) -> bool:
        rel = self.relative(path)
        if rel is None or any(part.startswith(".") for part in rel.parts):
            return False
        text = str(rel)
        return any(p.match(text) for p in self._include) and not any(
            p.match(text) for p in self._exclude
        )


@dataclass(frozen=True)
class SourcesConfig:
    file: Path
    roots: tuple[SourceRoot, ...]
    state_path: Path

    def root_for(self, path: Path) -> SourceRoot | None:
        """The first root whose patterns pick ``path`` (roots may overlap; the first wins)."""
        for candidate in dict.fromkeys((absolute(path), Path(path).resolve())):
            root = next((r for r in self.roots if r.matches(candidate)), None)
            if root is not None:
                return root
        return None


def absolute(path: str | Path) -> Path:
    """An absolute, normalised path; symlinks are kept (files are named as scanned)."""
    return Path(os.path.abspath(Path(path).expanduser()))


def load_sources(path: str | Path) -> SourcesConfig:
    """Read and validate a sources file; every problem is an InvalidInputError naming it."""
    path = Path(path).expanduser()
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InvalidInputError(
            f"sources file {path} does not exist; create it (see docs/dagster.md) or point "
            "MEMORY_PIPELINE_SOURCES at one"
        ) from exc
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InvalidInputError(f"sources file {path} cannot be read as YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise InvalidInputError(f"sources file {path} must be a mapping with a 'roots' list")
    try:
        spec = SourcesFileSpec.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidInputError(f"sources file {path} is invalid — {problems}") from exc
    base = path.absolute().parent
    roots = []
    names: set[str] = set()
    for i, r in enumerate(spec.roots):
        folder = (base / Path(r.path).expanduser()).resolve()
        name = r.name or folder.name or f"root{i}"
        if name in names:
            raise InvalidInputError(f"sources file {path}: two roots are named {name!r}")
        names.add(name)
        roots.append(
            SourceRoot(
                name=name,
                path=folder,
                kind=r.kind,
                patterns=tuple(r.patterns or DEFAULT_PATTERNS[r.kind]),
                exclude=tuple(DEFAULT_EXCLUDE[r.kind] if r.exclude is None else r.exclude),
                knowledge_type=r.knowledge_type or DEFAULT_KNOWLEDGE_TYPE[r.kind],
                importance=r.importance,
                tags=tuple(r.tags),
                space=r.space,
            )
        )
    state = absolute(base / spec.state) if spec.state else base / DEFAULT_STATE_NAME
    return SourcesConfig(file=path.absolute(), roots=tuple(roots), state_path=state)
