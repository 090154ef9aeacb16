"""The ``memory-pipeline`` command line: every argparse command, at the edge of the core.

``main`` is the entry point (``cli/main.py``: ``capture`` is handed over before the rest
is imported); ``cli/commands.py`` is the composition root for terminal use, and each
module registers the commands of one concern (reports, forgetting, sources,
evaluation). The core under ``memory_pipeline`` imports nothing from here.
"""

from memory_pipeline.cli.main import main

__all__ = ["main"]
