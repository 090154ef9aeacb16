"""Sphinx configuration: the existing Markdown pages through MyST, references generated
from the code (``_ext/``), diagrams from the Graphviz sources in ``diagrams/``."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(DOCS / "_ext"), str(ROOT)]

project = "memory-pipeline"
author = "memory-pipeline contributors"
copyright = "memory-pipeline contributors"
language = "en"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.graphviz",
    "sphinx.ext.viewcode",
    "cli_reference",
    "mcp_reference",
    "dagster_reference",
    "results_charts",
    "outside_pages",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
root_doc = "index"

# GitHub-style anchors, so the pages' own links (`dagster.md#measured`) resolve here too.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "dollarmath"]

# Help texts and descriptions are shown as the code writes them: "--recursive" stays two
# hyphens, 'hashing' keeps its straight quotes.
smartquotes = False

html_theme = "furo"
html_title = "memory-pipeline"
html_static_path: list[str] = []
# The READMEs' pages are read from the repository root; a copy of docs/ sources would mislead.
html_copy_source = False

graphviz_output_format = "svg"

autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
    # pydantic's own class attributes, the same on every model
    "exclude-members": "model_config, model_fields, model_computed_fields",
}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_class_signature = "mixed"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# What the generated references import, imported before autodoc runs: once autodoc has
# collected the members of a pydantic model (memory_pipeline.config's settings), a
# pydantic model defined afterwards fails to build ("the type annotation for
# `__pydantic_extra__` must be `dict[str, ...]`"), and the MCP SDK and Dagster define
# theirs when first imported.
import logging  # noqa: E402

import mcp  # noqa: E402, F401

import memory_pipeline.pipeline.definitions  # noqa: E402, F401
import serving.__main__  # noqa: E402
import serving.server  # noqa: E402, F401

# The generated references build a throw-away memory; its migrations and FAISS's loader
# log at INFO, which is noise in the build's output.
for name in ("alembic", "faiss", "faiss.loader"):
    logging.getLogger(name).setLevel(logging.WARNING)

# Docstrings write set sizes as |relevant ∩ top k|, which reStructuredText reads as a
# substitution; no docstring here defines one, so such bars are shown as they are.
SET_SIZE = re.compile(r"\|(?=\S)([^|`\n]*?\S)\|(?!_)")


def show_set_sizes(
    app: object, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    for i, line in enumerate(lines):
        # "| " opens a line block and "+-" a grid table; those bars are markup
        if not line.lstrip().startswith(("| ", "+-", "+=")):
            lines[i] = SET_SIZE.sub(r"\\|\1\\|", line)


def drop_dataclass_signatures(
    app: object, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """A dataclass without a docstring gets its signature as one, a constant its type's
    docstring (``dict``'s); the page shows the signature and the value already."""
    if what == "class" and lines and lines[0].startswith(f"{getattr(obj, '__name__', '')}("):
        lines.clear()
    if what == "data" and "\n".join(lines).strip() == (inspect.getdoc(type(obj)) or "").strip():
        lines.clear()


def setup(app: Any) -> None:
    app.connect("autodoc-process-docstring", show_set_sizes)
    app.connect("autodoc-process-docstring", drop_dataclass_signatures)
