"""``memory-pipeline``: the entry point of the command line.

``capture`` and ``recall --prompt`` run as Claude Code hooks and must return in
milliseconds, so they are handed to ``cli/capture.py`` and ``cli/prompt_hook.py`` before
anything heavy is imported: this module imports only the standard library. ``serve``,
which an agent spawns and then waits for, goes straight to the server's entry point
(``serving.__main__``, whose parser ``serve`` shows), without the parsers and modules of
every other command (0.1 s). Every other command goes to ``cli/commands.py`` (the parser,
the settings, the store). The names defined there (``build_parser``, ``READER_GONE``, …)
are reachable from here as well, imported when first asked for.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_pipeline.cli.commands import READER_GONE as READER_GONE
    from memory_pipeline.cli.commands import build_parser as build_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``sys.argv`` unless given); its exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["capture"]:
        from memory_pipeline.cli.capture import main as capture

        return capture(words[1:])
    if words[:1] == ["recall"] and "--prompt" in words:
        from memory_pipeline.cli.prompt_hook import main as prompt

        return prompt(words[1:])
    if words[:1] == ["serve"]:
        from serving.__main__ import parse_args, serve

        return serve(parse_args(words[1:], prog="memory-pipeline serve"))
    from memory_pipeline.cli import commands

    return commands.main(argv)


def __getattr__(name: str) -> Any:
    if name.startswith("__"):  # the import system's questions (__path__…): not a command's
        raise AttributeError(name)
    from memory_pipeline.cli import commands

    return getattr(commands, name)


if __name__ == "__main__":
    sys.exit(main())
