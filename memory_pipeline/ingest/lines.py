"""A session log read one line at a time, whatever its size.

A file is read whole under the file cap (``HYBRID_RAG_MAX_FILE_BYTES``), but a session
log (Claude Code, Codex) only grows: a long session with big tool outputs passes any cap
a file sensibly has, and refusing it would keep its new turns out for good. So a log is
streamed; memory is bounded by its longest line, which has a bound of its own
(``HYBRID_RAG_MAX_SESSION_LINE_BYTES``) since one record is parsed whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memory_pipeline.errors import InvalidInputError
from memory_pipeline.ingest.loaders import DEFAULT_MAX_BYTES

#: One record of a session log: a tool's output or a file it wrote, kept whole by the agent.
DEFAULT_MAX_LINE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class ReadLimits:
    """What a conversation file may hold: an export is read whole, at most ``file_bytes``;
    a session log line by line whatever its size, each line at most ``line_bytes``."""

    file_bytes: int = DEFAULT_MAX_BYTES
    line_bytes: int = DEFAULT_MAX_LINE_BYTES


DEFAULT_LIMITS = ReadLimits()


def read_lines(path: Path, max_line_bytes: int) -> Iterator[tuple[int, str]]:
    """Each line of ``path`` with its number (from 1), split at ``\\n`` only: a JSON line
    may hold U+2028 or U+0085 unescaped, which ``str.splitlines`` would cut."""
    try:
        with path.open("rb") as fh:
            for number, line in enumerate(iter(lambda: fh.readline(max_line_bytes + 1), b""), 1):
                if len(line) > max_line_bytes and not line.endswith(b"\n"):
                    raise InvalidInputError(_too_long(path, number, max_line_bytes))
                yield number, _decode(path, number, line)
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def _decode(path: Path, number: int, line: bytes) -> str:
    try:
        return line.decode("utf-8-sig" if number == 1 else "utf-8")  # -sig: a BOM is no content
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{path}: line {number} cannot be read as UTF-8 text: {exc}"
        ) from exc


def _too_long(path: Path, number: int, max_line_bytes: int) -> str:
    return (
        f"{path}: line {number} is over the {max_line_bytes / 2**20:.1f} MB limit of one "
        f"session record ({max_line_bytes} bytes); raise HYBRID_RAG_MAX_SESSION_LINE_BYTES "
        "to read it (the log as a whole may be any size)"
    )
