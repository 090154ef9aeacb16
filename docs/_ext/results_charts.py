"""``results-chart``: a bar chart of a Markdown results table, drawn when the site is built.

    ```{results-chart} ../eval/README.md
    :table: SciFact (
    :columns: nDCG@10 (top_n 50), Recall@10, MRR
    :caption: SciFact, 300 queries
    ```

The chart reads the first table after the line that starts with ``:table:`` in the
named page, the same table the reader sees there: a number changed in the page
changes the chart, and no number lives anywhere else. Rows are the table's first
column (bold and parentheses dropped); a cell with no number is left out.
"""

from __future__ import annotations

import html
import io
import math
import re
from pathlib import Path
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

NUMBER = re.compile(r"[-−+]?\d+(?:\.\d+)?")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_table(text: str, after: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the first Markdown table after the line starting with ``after``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(after)), None)
    if start is None:
        raise ExtensionError(f"results-chart: no line starts with {after!r}")
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append(_cells(line))
        elif rows:
            break
    if len(rows) < 3:
        raise ExtensionError(f"results-chart: no table after {after!r}")
    return rows[0], rows[2:]


def label(cell: str) -> str:
    plain = cell.replace("**", "").replace("`", "")
    return plain.split(" (")[0].strip()


def number(cell: str) -> float:
    found = NUMBER.search(cell.replace("**", ""))
    return float(found.group().replace("−", "-")) if found else math.nan


def series(
    header: list[str], rows: list[list[str]], columns: list[str]
) -> tuple[list[str], dict[str, list[float]]]:
    missing = [c for c in columns if c not in header]
    if missing:
        raise ExtensionError(f"results-chart: no column {missing} in {header}")
    names = [label(r[0]) for r in rows]
    return names, {c: [number(r[header.index(c)]) for r in rows] for c in columns}


def draw(names: list[str], values: dict[str, list[float]], caption: str) -> str:
    """An SVG bar chart, bars grouped by row; horizontal when the row names are long."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "memory-pipeline"})
    found = [v for vs in values.values() for v in vs if not math.isnan(v)]
    floor = max(0.0, math.floor((min(found) - 0.05) * 10) / 10)
    top = min(1.0, max(found) + 0.04) if max(found) <= 1 else max(found) * 1.1
    horizontal = max(len(n) for n in names) > 14
    width = 0.8 / len(values)
    if horizontal:
        size = (8.0, 0.45 * len(names) * max(1, len(values) / 2) + 1.2)
    else:
        size = (max(6.0, 1.1 * len(names) + 2.0), 3.4)
    fig, ax = plt.subplots(figsize=size)
    for i, (column, vs) in enumerate(values.items()):
        offset = (i - (len(values) - 1) / 2) * width
        places = [x + offset for x in range(len(names))]
        lengths = [0 if math.isnan(v) else v - floor for v in vs]
        if horizontal:
            bars = ax.barh(places, lengths, width, left=floor)
        else:
            bars = ax.bar(places, lengths, width, bottom=floor)
        bars.set_label(label(column))
        for at, v in zip(places, vs, strict=True):
            if math.isnan(v):
                continue
            if horizontal:
                ax.text(v + 0.002, at, f"{v:.3f}", va="center", fontsize=7)
            else:
                ax.text(at, v + 0.003, f"{v:.3f}", ha="center", va="bottom", fontsize=7)
    if horizontal:
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(floor, top + 0.02)
    else:
        ax.set_xticks(range(len(names)), names, fontsize=8)
        ax.set_ylim(floor, top)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(caption, fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg") :]
    # Scale with the page: the viewBox keeps the proportions.
    return re.sub(
        r'<svg([^>]*?) width="[^"]*" height="[^"]*"',
        r'<svg\1 style="width:100%;height:auto"',
        svg,
        count=1,
    )


class ResultsChart(SphinxDirective):
    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {
        "table": directives.unchanged_required,
        "columns": directives.unchanged_required,
        "caption": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        _, path = self.env.relfn2path(self.arguments[0], self.env.docname)
        self.env.note_dependency(path)
        header, rows = read_table(Path(path).read_text(encoding="utf-8"), self.options["table"])
        columns = [c.strip() for c in self.options["columns"].split(",")]
        names, values = series(header, rows, columns)
        caption = self.options.get("caption", "")
        svg = draw(names, values, caption)
        alt = html.escape(f"Bar chart: {caption}")
        markup = f'<figure class="results-chart" role="img" aria-label="{alt}">{svg}</figure>'
        return [nodes.raw("", markup, format="html")]


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("results-chart", ResultsChart)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
