"""Dagster's entry point (see workspace.yaml): the composition root, and nothing else.

The environment is read here, when Dagster loads the definitions — not at import.
"""

import os

import dagster as dg

from memory_pipeline.pipeline.definitions import build_definitions


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions(os.environ)
