"""Which project a stored session was worked in: ``import … --space auto``.

Claude Code's session logs give the working folder on every message (``cwd``); a Codex
CLI rollout gives it once, in its ``session_meta``. The space is then that folder's
project's (``spaces.project_space``), as the capture hook takes it for a live session,
so a whole history imported at once keeps each project's sessions apart.
"""

from __future__ import annotations

import json
from pathlib import Path

from memory_pipeline.sources.sources_file import SourceKind
from memory_pipeline.spaces import ProjectSpace, project_space

#: The kinds whose sessions hold their working folder.
WITH_FOLDER = (SourceKind.CLAUDE_CODE, SourceKind.CODEX)
#: The ``--space`` value that asks for each session's own project's space.
AUTO = "auto"
#: Lines read before a session is taken to name no folder (it is named in the first few).
MAX_LINES = 200


def session_folder(path: Path) -> str | None:
    """The working folder a Claude Code log or Codex rollout names first, or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh):
                if n >= MAX_LINES:
                    break
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(record, dict):
                    continue
                payload = record.get("payload")
                if record.get("type") == "session_meta" and isinstance(payload, dict):
                    record = payload
                cwd = record.get("cwd")
                if isinstance(cwd, str) and cwd.startswith("/"):
                    return cwd
    except OSError:
        return None
    return None


def session_project(path: Path) -> ProjectSpace | None:
    """The project of the folder the session was worked in (None: it names none)."""
    folder = session_folder(path)
    return None if folder is None else project_space(Path(folder))
