"""Small builders of docutils nodes for the generated references.

Text that comes from the code (help strings, tool descriptions, docstrings of Dagster
definitions) is put in as text, never parsed as markup: a stray ``*`` or ``_`` in a
description cannot break the build, and what the page shows is what the code says.
Only code spans in backticks, as Dagster's UI and MCP clients show them, become code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from docutils import nodes

Cell: TypeAlias = str | nodes.Node


def section(title: str, ident: str, *, literal_title: bool = False) -> nodes.section:
    sec = nodes.section(ids=[nodes.make_id(ident)], names=[nodes.fully_normalize_name(ident)])
    sec += nodes.title("", "", nodes.literal(title, title) if literal_title else nodes.Text(title))
    return sec


CODE_SPAN = re.compile(r"(``?)([^`]+?)\1")


def with_code(text: str) -> nodes.paragraph:
    """One paragraph of ``text``, its lines joined; code spans in backticks become code."""
    text = " ".join(line.strip() for line in text.strip().splitlines())
    para = nodes.paragraph()
    at = 0
    for match in CODE_SPAN.finditer(text):
        if match.start() > at:
            para += nodes.Text(text[at : match.start()])
        para += code(match.group(2))
        at = match.end()
    if at < len(text):
        para += nodes.Text(text[at:])
    return para


def paragraphs(text: str | None) -> list[nodes.paragraph]:
    """``text`` split at blank lines into paragraphs (see ``with_code``)."""
    if not text or not text.strip():
        return []
    return [with_code(block) for block in re.split(r"\n\s*\n", text.strip())]


def literal(code: str, language: str = "text") -> nodes.literal_block:
    block = nodes.literal_block(code, code)
    block["language"] = language
    return block


def code(text: str) -> nodes.literal:
    return nodes.literal(text, text)


def as_json(value: Any) -> nodes.literal_block:
    return literal(json.dumps(value, indent=2, ensure_ascii=False), "json")


def inline(*parts: Cell, sep: str = ", ") -> nodes.paragraph:
    """One paragraph of text and nodes, ``sep`` between them."""
    para = nodes.paragraph()
    for i, part in enumerate(parts):
        if i:
            para += nodes.Text(sep)
        para += nodes.Text(part) if isinstance(part, str) else part
    return para


def table(headers: Sequence[str], rows: Iterable[Sequence[Cell]]) -> nodes.table:
    rows = list(rows)
    tbl = nodes.table()
    group = nodes.tgroup(cols=len(headers))
    tbl += group
    for _ in headers:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    head += _row(headers)
    group += head
    body = nodes.tbody()
    for row in rows:
        body += _row(row)
    group += body
    return tbl


def _row(cells: Sequence[Cell]) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        if isinstance(cell, nodes.Node):
            entry += cell if isinstance(cell, nodes.Body) else nodes.paragraph("", "", cell)
        elif cell:
            entry += with_code(cell)
        row += entry
    return row
