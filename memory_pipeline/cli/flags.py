"""Flags more than one command shares."""

from __future__ import annotations

import argparse


def add_all_spaces(p: argparse.ArgumentParser, what: str) -> None:
    """``--all-spaces``: an operator's explicit choice to act beyond the bound space."""
    p.add_argument(
        "--all-spaces",
        action="store_true",
        help=f"{what} every memory space, not only the bound one (HYBRID_RAG_SPACE / --space)",
    )
