"""What the CLI writes to a terminal: never a raw control character from stored text.

Stored text is cleaned on the way in (``metadata.strip_controls``), but a memory stored
before that, or written by other means, may still hold terminal escapes; printed raw,
``\\x1b[…`` recolours, moves or rewrites the user's terminal. Every control character
but newline and tab is written as its visible JSON escape (``\\u001b``), which also keeps
``--json`` output valid JSON meaning the same text.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

_SHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with each control character (but newline and tab) as ``\\uXXXX``."""
    return _SHOWN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class VisibleControls:
    """A text stream that writes control characters visibly (``visible``); anything else
    (``buffer``, ``fileno``, ``isatty``) is the wrapped stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(visible(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
