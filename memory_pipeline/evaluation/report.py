"""Reports of a run: Markdown tables, the JSON run (a baseline for ``--compare``), a PNG chart."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memory_pipeline.evaluation.compare import Comparison
from memory_pipeline.evaluation.results import EvalRun

# Metric families shown by k, in this order, with their table titles.
FAMILIES = {
    "ndcg": "nDCG@k",
    "recall": "Recall@k",
    "precision": "Precision@k",
    "hit_rate": "Hit Rate@k",
    "noise": "Noise rate@k (share of returned chunks from non-relevant documents)",
}


@dataclass(frozen=True)
class ReportPaths:
    markdown: Path
    json: Path
    chart: Path | None


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def headline_table(run: EvalRun) -> str:
    """One row per variant: the numbers to look at first."""
    k = run.headline_k
    cols = [f"ndcg@{k}", f"recall@{k}", "mrr", f"precision@{k}", f"noise@{k}"]
    if run.k_values[-1] != k:
        cols.insert(2, f"recall@{run.k_values[-1]}")
    auth = f"authority_found@{run.authority_window}"
    if any(auth in v.summary for v in run.variants):
        cols += [auth, "authority_mean_rank"]
    head = "| variant | " + " | ".join(cols) + " | seconds |"
    rows = [head, "|" + "---|" * (len(cols) + 2)]
    for v in run.variants:
        default = run.settings.get("default_variant", run.primary)
        name = f"**{v.name}** (default)" if v.name == default else v.name
        cells = [_fmt(v.summary.get(c)) for c in cols]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {v.seconds:.1f} |")
    return "\n".join(rows)


def family_table(run: EvalRun, family: str) -> str:
    head = "| variant | " + " | ".join(f"@{k}" for k in run.k_values) + " |"
    rows = [head, "|" + "---|" * (len(run.k_values) + 1)]
    for v in run.variants:
        cells = [_fmt(v.summary.get(f"{family}@{k}")) for k in run.k_values]
        rows.append(f"| {v.name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def render_markdown(run: EvalRun, comparison: Comparison | None = None) -> str:
    parts = [
        f"# Retrieval evaluation — {run.dataset}",
        "",
        f"- created: {run.created_at}",
        f"- model: `{run.model_id}`",
        f"- memory: {run.n_documents} documents, {run.n_chunks} chunks; "
        f"{run.n_queries} queries ({int(run.variant().summary.get('queries_judged', 0))} "
        "with relevant documents)",
        f"- settings: {', '.join(f'{k}={v}' for k, v in run.settings.items())}",
        "- documents are ranked by their best chunk; MRR is cut at max(k)",
        *[f"- note: {n}" for n in run.notes],
        "",
        "## Summary",
        "",
        headline_table(run),
    ]
    for family, title in FAMILIES.items():
        parts += ["", f"## {title}", "", family_table(run, family)]
    if comparison is not None:
        parts += ["", "## Compared with a previous run", "", "```", comparison.render(), "```"]
    return "\n".join(parts) + "\n"


def render_chart(run: EvalRun, path: Path) -> Path:
    """One panel per metric family, metric by k, a line per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = 3
    rows = -(-len(FAMILIES) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[len(FAMILIES) :]:
        ax.axis("off")
    for ax, (family, title) in zip(flat, FAMILIES.items(), strict=False):
        for v in run.variants:
            ks = [k for k in run.k_values if f"{family}@{k}" in v.summary]
            ax.plot(ks, [v.summary[f"{family}@{k}"] for k in ks], marker="o", label=v.name)
        ax.set_title(title.split(" (")[0])
        ax.set_xlabel("k")
        ax.set_xscale("log")
        ax.set_xticks(run.k_values, [str(k) for k in run.k_values])
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    flat[0].legend(fontsize=8)
    fig.suptitle(f"{run.dataset} — {run.model_id}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(
    run: EvalRun,
    out_dir: Path,
    *,
    comparison: Comparison | None = None,
    chart: bool = True,
) -> ReportPaths:
    """``<dataset>-<timestamp>.{md,json,png}`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = re.sub(r"[^0-9T]", "", run.created_at)[:15]
    stem = f"{re.sub(r'[^A-Za-z0-9._+-]+', '_', run.dataset)}-{stamp}"
    md, js = out_dir / f"{stem}.md", out_dir / f"{stem}.json"
    run.save(js)
    md.write_text(render_markdown(run, comparison), encoding="utf-8")
    png = render_chart(run, out_dir / f"{stem}.png") if chart else None
    return ReportPaths(md, js, png)
