"""The ``memory-pipeline`` command line: every argparse command, at the edge of the core.

``main`` is the composition root for terminal use; each module registers the
commands of one concern (reports, forgetting, sources, evaluation). The core
under ``memory_pipeline`` imports nothing from here.
"""

from memory_pipeline.cli.main import main

__all__ = ["main"]
