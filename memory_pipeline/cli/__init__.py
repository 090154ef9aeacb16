"""The ``memory-pipeline`` command line: every argparse command, at the edge of the core.

``main`` is the composition root for terminal use; each module registers the
commands of one concern (reports, forgetting, sources, evaluation). The core
under ``memory_pipeline`` imports nothing from here.

``capture`` is a Claude Code hook that must return in milliseconds, so it is handed
over before the full command line (and the settings, the store, the models) is
imported; every other command goes to ``cli.main``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command (``sys.argv`` unless given); its exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["capture"]:
        from memory_pipeline.cli.capture import main as capture

        return capture(words[1:])
    from memory_pipeline.cli.main import main as full

    return full(argv)


__all__ = ["main"]
