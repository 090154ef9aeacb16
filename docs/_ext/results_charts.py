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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "memory-pipeline"})
    found = [v for vs in values.values() for v in vs if not math.isnan(v)]
    floor = max(0.0, math.floor((min(found) - 0.05) * 10) / 10)
    width = 0.8 / len(values)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(names) + 1.5), 3.6))
    for i, (column, vs) in enumerate(values.items()):
        xs = [x + (i - (len(values) - 1) / 2) * width for x in range(len(names))]
        bars = ax.bar(xs, [0 if math.isnan(v) else v - floor for v in vs], width, bottom=floor)
        bars.set_label(label(column))
        for x, v in zip(xs, vs, strict=True):
            if not math.isnan(v):
                ax.text(x, v + 0.003, f"{v:.3f}", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(floor, min(1.0, max(found) + 0.05) if max(found) <= 1 else max(found) * 1.1)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(caption, fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    fig.tight_layout()
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]


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
