"""Dagster definitions for the memory pipeline: thin adapters over the plain-Python core.

Grouped by concern (``ingestion``, ``maintenance``, ``evaluation``), one Dagster
kind per file; ``definitions.build_definitions`` assembles them from a
configuration read once at the composition root (the repository's
``definitions.py``).
"""
