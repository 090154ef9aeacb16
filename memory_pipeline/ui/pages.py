"""The viewer's pages as HTML: plain functions from what the memory returned to a page.

Server-side rendered, no script and no asset from the network: one stylesheet inline,
readable from a phone's width up, every control a link, a form field or a button (so
the keyboard reaches all of it). Every value from the memory goes through ``esc``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from memory_pipeline.locations import shown
from memory_pipeline.memory.stats import SystemStats
from memory_pipeline.metadata import KnowledgeType, is_kept_tag
from memory_pipeline.store.handed import HandedRecord
from memory_pipeline.store.history import Change
from memory_pipeline.types import ChunkRecord, DocumentInfo, SearchHit, SearchResult
from memory_pipeline.ui.forms import FIELD as FORM_FIELD
from memory_pipeline.ui.runs import STATUSES, PipelineRuns

STYLE = """
:root { color-scheme: light dark; --muted: #6b7280; --line: #d1d5db; --mark: #fde68a; }
* { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; }
header { display: flex; flex-wrap: wrap; gap: .25rem 1rem; align-items: baseline;
  padding: .75rem 1rem; border-bottom: 1px solid var(--line); }
header strong { margin-right: auto; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem; }
a { color: inherit; }
nav a[aria-current] { font-weight: 600; }
h1 { font-size: 1.4rem; margin: .5rem 0 1rem; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid var(--line);
  vertical-align: top; overflow-wrap: break-word; }
.any { overflow-wrap: anywhere; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: var(--muted); }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(9rem, 1fr)); gap: .5rem; }
.tile { border: 1px solid var(--line); border-radius: .4rem; padding: .5rem .75rem; }
.tile b { display: block; font-size: 1.4rem; }
form.search { display: flex; flex-wrap: wrap; gap: .5rem; margin-bottom: 1rem; }
form.search input[type=search] { flex: 1 1 16rem; font: inherit; padding: .4rem; }
form.search button { font: inherit; padding: .4rem .9rem; }
form.search input[type=number] { width: 5rem; }
form.search .options { flex-basis: 100%; }
form.search .options label { margin-right: .75rem; white-space: nowrap; }
article.hit, article.chunk { border: 1px solid var(--line); border-radius: .4rem;
  padding: .75rem; margin: 0 0 .75rem; overflow-wrap: anywhere; }
article.chunk.focus { border-width: 2px; }
.content { white-space: pre-wrap; margin: .5rem 0; }
mark { background: var(--mark); color: #000; }
details.why table { font-size: .9rem; }
.empty { border: 1px dashed var(--line); border-radius: .4rem; padding: 1rem; }
code { font-size: .9em; }
form.edit { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; margin: .5rem 0; }
form.edit label { display: flex; flex-direction: column; font-size: .9rem; }
form.edit input, form.edit select, form.edit button, form.delete button { font: inherit;
  padding: .3rem; }
form.edit input[type=number] { width: 6rem; }
.saved { font-weight: 600; }
"""

#: How each stage of ``SearchHit.stage_scores`` reads on the page, in the pipeline's order.
STAGES = {
    "dense_rank": "dense rank",
    "dense": "dense score (cosine)",
    "sparse_rank": "BM25 rank",
    "sparse": "BM25 score",
    "fused": "fused score (reciprocal rank fusion)",
    "cross_encoder": "cross-encoder score",
    "relevance": "relevance, normalised",
    "decay": "decay (by knowledge type and age)",
    "access_boost": "access boost",
    "memory": "memory-axis score",
    "mmr_rank": "rank after MMR (diversity)",
}


#: Every link is relative to the page's base: the viewer sets it to where it is served
#: (``/`` by ``memory-pipeline ui``, ``/ui/`` by ``serve --http``; ``app.Viewer``).
BASE = "/"


def based(html: str, scope: Mapping[str, Any]) -> str:
    """``html`` with its links relative to where the viewer is served (``root_path``)."""
    root = scope.get("root_path", "").rstrip("/")
    return html.replace(f'<base href="{BASE}">', f'<base href="{root}/">', 1) if root else html


def esc(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def page(title: str, body: str, *, current: str = "", spaces: str = "") -> str:
    """A whole page: the header with the navigation, then ``body``."""
    links = [
        ("./", "Overview"),
        ("documents", "Timeline"),
        ("search", "Search"),
        ("handed", "Handed to the agent"),
        ("proposals", "The agent's changes"),
        ("forgetting", "Forgetting"),
        ("archive", "Archive"),
    ]
    nav = " ".join(
        f'<a href="{href}"{" aria-current=page" if href == current else ""}>{name}</a>'
        for href, name in links
    )
    return (
        f'<!doctype html>\n<html lang=en><head><meta charset=utf-8><base href="{BASE}">'
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · memory-pipeline</title><style>{STYLE}</style></head><body>"
        f"<header><strong>memory-pipeline</strong><nav>{nav}</nav>"
        f"<span class=muted>{esc(spaces)}</span></header><main><h1>{esc(title)}</h1>"
        f"{body}</main></body></html>\n"
    )


def token_field(token: str) -> str:
    """The hidden field that carries a form's token (``forms.py``)."""
    return f'<input type="hidden" name="{FORM_FIELD}" value="{esc(token)}">'


def doc_link(doc_id: str, title: str | None, chunk_index: int | None = None) -> str:
    query = (
        f"?{urlencode({'chunk': chunk_index})}#chunk-{chunk_index}"
        if chunk_index is not None
        else ""
    )
    return f'<a href="documents/{esc(doc_id)}{query}">{esc(title or doc_id)}</a>'


def overview(
    stats: SystemStats,
    recent: Sequence[DocumentInfo],
    days: Sequence[tuple[str | None, dt.date, dt.date, int]] = (),
    today: dt.date | None = None,
    *,
    sessions: Collection[str] = (),
    runs: PipelineRuns | None = None,
    n_sessions: int | None = None,
) -> str:
    """The memory at a glance; ``runs``: the pipeline's last runs, when asked for;
    ``n_sessions``: how many of the documents are sessions, when counted."""
    last = "" if runs is None else "<h2>The pipeline's last runs</h2>" + pipeline_runs(runs)
    if stats.documents == 0:
        return page(
            "Overview",
            '<div class="empty"><p>This memory holds nothing yet.</p><p>Put something in: '
            "<code>memory-pipeline ingest notes/*.md</code>, or let the agent capture its "
            "sessions (<code>memory-pipeline setup claude-code --hooks</code>). Then reload "
            "this page.</p></div>" + last,
            current="./",
            spaces=stats.spaces,
        )
    tiles = [
        ("documents", stats.documents),
        *([("of them sessions", n_sessions)] if n_sessions is not None else []),
        ("chunks", stats.chunks),
        ("with importance", f"{stats.importance_share:.0%}"),
        ("tagged", f"{stats.tag_coverage:.0%}"),
        ("waiting for the index", stats.unindexed_chunks),
        ("accesses", stats.total_accesses),
    ]
    body = ['<div class="tiles">']
    body += [f'<div class="tile"><b>{esc(v)}</b>{esc(k)}</div>' for k, v in tiles]
    body.append("</div>")
    if days:
        today = today or dt.datetime.now(dt.UTC).date()
        body.append("<h2>Growth</h2>" + growth_chart(growth(days)))
        body.append("<h2>Chunks by knowledge type and age</h2>" + age_chart(ages(days, today)))
    body.append("<h2>By knowledge type</h2>")
    body.append(
        table(
            ["knowledge type", "documents", "chunks"],
            [
                [esc(k.knowledge_type), num(k.documents), num(k.chunks)]
                for k in stats.by_knowledge_type
            ],
        )
    )
    body.append("<h2>Index and captures</h2>" + _health(stats))
    if stats.redactions:
        body.append("<h2>Taken out before storing</h2>")
        body.append(
            table(
                ["kind", "times"],
                [[esc(kind), num(n)] for kind, n in sorted(stats.redactions.items())],
            )
        )
    body.append(last)
    body.append("<h2>Newest</h2>")
    body.append(documents_table(recent, sessions))
    body.append('<p><a href="documents">Every document, newest first</a></p>')
    return page("Overview", "".join(body), current="./", spaces=stats.spaces)


#: Ages the chart of chunks by knowledge type groups them in: (label, at most days old).
AGE_BUCKETS = (("a week", 7), ("a month", 30), ("a quarter", 91), ("a year", 365), ("older", None))
_COLOURS = ("#1d4ed8", "#0891b2", "#16a34a", "#ca8a04", "#9ca3af")


def _health(stats: SystemStats) -> str:
    """The published index and the capture folder, as ``stats`` reads them."""
    rows = []
    index = stats.index
    if index is None:
        rows.append(["index", esc("none published yet: memory-pipeline update-index")])
    else:
        rows.append(
            ["index", esc(f"version {index.version} ({index.backend}, {index.kind}), "
                          f"{index.n_dense} vectors, published {index.created_at}")]
        )  # fmt: skip
    rows.append(["waiting for the index", num(stats.unindexed_chunks)])
    rows.append(["embedding model", esc(stats.embedder)])
    captures = stats.captures
    if captures:
        said = f"{captures.get('waiting', 0)} waiting, {captures.get('set_aside', 0)} set aside"
        if captures.get("worker_failed"):
            said += "; the capture worker cannot run: memory-pipeline capture --status"
        rows.append(["captured sessions", esc(said)])
    return table(["", ""], rows)


def pipeline_runs(runs: PipelineRuns) -> str:
    """The pipeline's last runs, newest first (times in UTC), or why there are none."""
    where = f'<p class="muted">Dagster home: {esc(shown(runs.home))}</p>' if runs.home else ""
    if not runs.runs:
        return f'<div class="empty"><p>{esc(runs.note)}</p>{where}</div>'
    rows = [
        [esc(run.job),
         esc(STATUSES.get(run.status, run.status.lower())),
         esc(f"{run.started or run.created:%Y-%m-%d %H:%M:%S}"),
         "" if run.seconds is None else esc(f"{run.seconds:.1f} s"),
         f"<code>{esc(run.run_id[:8])}</code>"]
        for run in runs.runs
    ]  # fmt: skip
    return table(["job", "status", "started (UTC)", "took", "run"], rows) + where


def growth(days: Iterable[tuple[str | None, dt.date, dt.date, int]]) -> list[tuple[dt.date, int]]:
    """The chunks held at the end of each day something was stored (``Store.chunk_days``)."""
    per_day: dict[dt.date, int] = {}
    for _kind, stored, _dated, n in days:
        per_day[stored] = per_day.get(stored, 0) + n
    total, out = 0, []
    for day in sorted(per_day):
        total += per_day[day]
        out.append((day, total))
    return out


def ages(
    days: Iterable[tuple[str | None, dt.date, dt.date, int]], today: dt.date
) -> dict[str, list[int]]:
    """Chunks by knowledge type, counted in ``AGE_BUCKETS`` by their source date (else
    the day stored) as of ``today``."""
    out: dict[str, list[int]] = {}
    for kind, _stored, dated, n in days:
        old = (today - dated).days
        at = next(i for i, (_, most) in enumerate(AGE_BUCKETS) if most is None or old <= most)
        out.setdefault(kind or "unset", [0] * len(AGE_BUCKETS))[at] += n
    return dict(sorted(out.items()))


def growth_chart(points: Sequence[tuple[dt.date, int]]) -> str:
    """Chunks held over time, a bar a day something was stored."""
    width, height, top = 600, 120, max((n for _, n in points), default=0) or 1
    step = min(width / max(len(points), 1), 24.0)  # a few days: thin bars, from the left
    bars = "".join(
        f'<rect x="{i * step:.1f}" y="{height - n / top * (height - 20):.1f}" '
        f'width="{max(step - 2, 1):.1f}" height="{n / top * (height - 20):.1f}" fill="{_COLOURS[0]}">'
        f"<title>{esc(day.isoformat())}: {n} chunks</title></rect>"
        for i, (day, n) in enumerate(points)
    )
    first, last = points[0], points[-1]
    label = f"{first[0].isoformat()} to {last[0].isoformat()}: {last[1]} chunks"
    return (
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" class="chart growth" '
        f'aria-label="{esc(label)}">{bars}</svg><p class=muted>{esc(label)}</p>'
    )


def age_chart(rows: dict[str, list[int]]) -> str:
    """A bar a knowledge type, in segments by age."""
    width, row_h, label_w = 600, 26, 110
    top = max((sum(counts) for counts in rows.values()), default=0) or 1
    scale = (width - label_w - 40) / top
    parts = []
    for r, (kind, counts) in enumerate(rows.items()):
        y, x = r * row_h, float(label_w)
        parts.append(
            f'<text x="0" y="{y + 17}" font-size="13" fill="currentColor">{esc(kind)}</text>'
        )
        for (name, _), colour, n in zip(AGE_BUCKETS, _COLOURS, counts, strict=True):
            if n:
                parts.append(
                    f'<rect x="{x:.1f}" y="{y + 4}" width="{n * scale:.1f}" height="{row_h - 8}" '
                    f'fill="{colour}"><title>{esc(kind)}, {_age_name(name)}: {n} chunks</title></rect>'
                )
                x += n * scale
        parts.append(
            f'<text x="{x + 4:.1f}" y="{y + 17}" font-size="13" fill="currentColor">{sum(counts)}</text>'
        )
    legend = " ".join(
        f'<span><span style="color:{c}">■</span> {esc(_age_name(name))}</span>'
        for (name, _), c in zip(AGE_BUCKETS, _COLOURS, strict=True)
    )
    height = max(len(rows), 1) * row_h
    return (
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" class="chart ages" '
        f'aria-label="chunks by knowledge type and age">{"".join(parts)}</svg>'
        f"<p class=muted>{legend}</p>"
    )


def _age_name(name: str) -> str:
    return name if name == "older" else f"within {name}"


def num(n: object) -> str:
    return f'<span class="num">{esc(n)}</span>'


def table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """A table of cells already escaped."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def documents_table(
    docs: Sequence[DocumentInfo],
    sessions: Collection[str] = (),
    spaces: Mapping[str, str] | None = None,
) -> str:
    """Documents with their dates; those in ``sessions`` marked as sessions; with a column
    of their space when ``spaces`` names them."""
    rows = [
        [esc(_day(d.source_date, d.created_at)),
         doc_link(d.doc_id, d.title) + (" <span class=muted>session</span>" if d.doc_id in sessions else ""),
         esc(d.knowledge_type or "")]
        + ([esc(spaces.get(d.doc_id, ""))] if spaces else [])
        for d in docs
    ]  # fmt: skip
    return table(["date", "document", "knowledge type"] + (["space"] if spaces else []), rows)


def _space_choice(names: Sequence[str], chosen: str) -> str:
    if not names:
        return ""
    options = "".join(
        f'<option value="{esc(v)}"{" selected" if chosen == v else ""}>{esc(v or "every space")}</option>'
        for v in ["", *names]
    )
    return f'<label>in <select name="space">{options}</select></label>'


def _day(source_date: dt.date | None, created_at: dt.datetime) -> str:
    return (source_date or created_at.date()).isoformat()


#: The timeline's kinds: every document, conversations only, or the others.
KINDS = {"": "everything", "sessions": "sessions", "documents": "documents"}


def timeline(
    docs: Sequence[DocumentInfo],
    *,
    offset: int,
    more: bool,
    spaces: str,
    chosen: dict[str, str],
    sessions: Collection[str] = (),
    kinds: Sequence[str] = (),
    space_names: Sequence[str] = (),
    doc_spaces: Mapping[str, str] | None = None,
) -> str:
    """The documents newest first, ``chosen`` the filters (kind, knowledge_type, tag,
    space); ``space_names``: the spaces to choose from (none: one space, no choice), and
    ``doc_spaces`` the space of each document listed."""
    options = "".join(
        f'<option value="{esc(v)}"{" selected" if chosen.get("kind", "") == v else ""}>{esc(n)}</option>'
        for v, n in KINDS.items()
    )
    types = "".join(
        f'<option value="{esc(k)}"{" selected" if chosen.get("knowledge_type", "") == k else ""}>'
        f"{esc(k or 'any knowledge type')}</option>"
        for k in ["", *kinds]
    )
    form = (
        '<form class="search" method="get" action="documents">'
        f'<label>Show <select name="kind">{options}</select></label>'
        f'<label>of <select name="knowledge_type">{types}</select></label>'
        f'<label>tagged <input name="tag" value="{esc(chosen.get("tag", ""))}" size="12"></label>'
        f"{_space_choice(space_names, chosen.get('space', ''))}"
        "<button>Filter</button></form>"
    )
    if not docs and offset == 0:
        body = form + '<div class="empty"><p>No documents here.</p></div>'
    else:
        body = form + documents_table(docs, sessions, doc_spaces)
        if more:
            query = urlencode(
                {**{k: v for k, v in chosen.items() if v}, "offset": offset + len(docs)}
            )
            body += f'<p><a href="documents?{query}">Older</a></p>'
    return page("Timeline", body, current="documents", spaces=spaces)


def document(
    doc: DocumentInfo,
    chunks: Sequence[ChunkRecord],
    focus: int | None,
    spaces: str,
    history: Sequence[Change] = (),
    *,
    form_token: str | None = None,
    saved: bool = False,
) -> str:
    """A document and its chunks; each chunk with its recorded changes (``history``: the
    document's, newest first), who made them and when. With ``form_token`` (the page may
    change this document) each chunk has a form for its memory fields, and the document
    a link to delete it; ``saved``: the focused chunk was just changed."""
    changes_of: dict[int | None, list[Change]] = {}
    for change in history:
        changes_of.setdefault(change.chunk_index, []).append(change)
    rows = [
        ["source", f'<span class="any">{esc(shown(Path(doc.source)))}</span>'],
        ["date", esc(_day(doc.source_date, doc.created_at))],
        ["stored", esc(doc.created_at.isoformat(timespec="seconds"))],
        ["knowledge type", esc(doc.knowledge_type or "none")],
        ["importance", esc("unset" if doc.importance is None else f"{doc.importance:g}")],
        ["chunks", esc(len(chunks))],
        ["id", f'<code class="any">{esc(doc.doc_id)}</code>'],
    ]
    body = [table(["", ""], rows)]
    if form_token is not None:
        body.append(
            f'<p><a href="documents/{esc(doc.doc_id)}/delete">Delete this document…</a></p>'
        )
    body.append("<h2>Chunks</h2>")
    for c in chunks:
        focused = " focus" if c.chunk_index == focus else ""
        fields = (
            f"#{c.chunk_index} · {c.knowledge_type or 'no knowledge type'} · importance "
            f"{'unset' if c.importance is None else f'{c.importance:g}'} · read "
            f"{c.access_count} times" + (f" · tags: {', '.join(c.tags)}" if c.tags else "")
        )
        said = "".join(
            f"<li>{esc(t.speaker)}"
            + (
                f" <span class=muted>{esc(t.said_at.isoformat(timespec='minutes'))}</span>"
                if t.said_at
                else ""
            )
            + "</li>"
            for t in c.turns
        )
        turns = f"<ul class=muted>{said}</ul>" if said else ""
        body.append(
            f'<article class="chunk{focused}" id="chunk-{c.chunk_index}">'
            f'<div class=muted>{esc(fields)}</div>{turns}<div class="content">{esc(c.content)}</div>'
            + (
                '<p class="saved" role="status">Saved.</p>'
                if saved and c.chunk_index == focus
                else ""
            )
            + (chunk_form(doc.doc_id, c, form_token) if form_token is not None else "")
            + f"{_history(changes_of.get(c.chunk_index, []))}</article>"
        )
    return page(doc.title or doc.doc_id, "".join(body), spaces=spaces)


def chunk_form(doc_id: str, chunk: ChunkRecord, token: str) -> str:
    """A chunk's memory fields as a form; what the page showed goes along (``was_…``) so
    that only what the person changed is written. The tags a session is looked up by are
    shown beside the field, not in it: a save keeps them (``corrections.edit_chunk``)."""
    importance = "" if chunk.importance is None else f"{chunk.importance!r}"
    kind = chunk.knowledge_type or ""
    tags = ", ".join(t for t in chunk.tags if not is_kept_tag(t))
    kept = [t for t in chunk.tags if is_kept_tag(t)]
    note = (
        f'<span class="muted">kept: {esc(", ".join(kept))} (a session\'s marks)</span>'
        if kept
        else ""
    )
    kinds = "".join(
        f'<option value="{esc(k)}"{" selected" if k == kind else ""}>{esc(k or "none")}</option>'
        for k in ["", *(t.value for t in KnowledgeType)]
    )
    return (
        f'<form class="edit" method="post" '
        f'action="documents/{esc(doc_id)}/chunks/{chunk.chunk_index}">'
        + token_field(token)
        + f'<input type="hidden" name="was_importance" value="{esc(importance)}">'
        f'<input type="hidden" name="was_knowledge_type" value="{esc(kind)}">'
        f'<input type="hidden" name="was_tags" value="{esc(tags)}">'
        '<label>importance <input type="number" name="importance" min="0" max="1" step="any" '
        f'value="{esc(importance)}" placeholder="unset"></label>'
        f'<label>knowledge type <select name="knowledge_type">{kinds}</select></label>'
        f'<label>tags <input name="tags" value="{esc(tags)}" size="24" '
        'placeholder="comma, separated"></label>'
        f"<button>Save</button>{note}</form>"
    )


def _history(changes: Sequence[Change]) -> str:
    """A chunk's recorded changes, newest first, folded."""
    if not changes:
        return ""
    items = "".join(
        f"<li>{esc(f'{c.at:%Y-%m-%d %H:%M}')} · {esc(c.actor)} · {esc(c.what)}"
        + (f" · {esc(c.review)}" if c.review else "")
        + "</li>"
        for c in changes
    )
    return f'<details class="history"><summary>History ({len(changes)})</summary><ul>{items}</ul></details>'


def search(
    query: str,
    result: SearchResult | None,
    error: str,
    spaces: str,
    chosen: Mapping[str, Any] | None = None,
) -> str:
    """The search form (``chosen``: what it was sent with), then the hits or the error."""
    chosen = chosen or {}
    kinds = "".join(
        f'<label><input type="checkbox" name="knowledge_type" value="{k.value}"'
        f"{' checked' if k.value in chosen.get('knowledge_type', ()) else ''}> {k.value}</label>"
        for k in KnowledgeType
    )

    def box(name: str, label: str) -> str:
        on = " checked" if chosen.get(name) == "on" else ""
        return f'<label><input type="checkbox" name="{name}"{on}> {label}</label>'

    def field(name: str, label: str, kind: str = "text", size: int = 12) -> str:
        value = esc(chosen.get(name, ""))
        return f'<label>{label} <input type="{kind}" name="{name}" value="{value}" size="{size}"></label>'

    more = (
        " open"
        if any(chosen.get(k) for k in ("tags", "knowledge_type", "from", "to", "rewrites"))
        else ""
    )
    form = (
        '<form class="search" method="get" action="search" role="search">'
        '<label for="q" class="muted">Query</label>'
        f'<input type="search" id="q" name="q" value="{esc(query)}" autofocus>'
        "<button>Search</button>"
        f'<div class="options">{box("memory", "memory axis")} {box("diversify", "diversify (MMR)")} '
        f"{field('top_k', 'hits', 'number', 4)}</div>"
        f'<details class="options"{more}><summary>Filters and other phrasings</summary>'
        f"<p>{field('tags', 'tags (all of)', size=24)}</p><p>knowledge type (any of): {kinds}</p>"
        f"<p>{field('from', 'dated from', 'date')} {field('to', 'to', 'date')}</p>"
        '<p><label>other phrasings of the question, one a line<br><textarea name="rewrites" '
        f'rows="3" cols="40">{esc(chosen.get("rewrites", ""))}</textarea></label></p></details>'
        "</form>"
    )
    if error:
        return page(
            "Search", form + f'<p role="alert">{esc(error)}</p>', current="search", spaces=spaces
        )
    if result is None:
        return page("Search", form, current="search", spaces=spaces)
    if not result.hits:
        body = form + f'<div class="empty"><p>Nothing found for “{esc(query)}”.</p></div>'
        return page("Search", body, current="search", spaces=spaces)
    terms = _terms(query)
    hits = "".join(_hit(rank, hit, terms) for rank, hit in enumerate(result.hits, 1))
    notes = "".join(f"<p class=muted>{esc(n)}</p>" for n in result.stats.notes)
    summary = (
        f"<p class=muted>{len(result.hits)} hits of {result.stats.candidates} candidates; "
        f"reranker: {esc(result.stats.reranker)}</p>"
    )
    return page("Search", form + summary + notes + hits, current="search", spaces=spaces)


def _terms(query: str) -> list[str]:
    return sorted(
        {w.lower() for w in re.findall(r"\w+", query) if len(w) > 1}, key=len, reverse=True
    )


def highlight(text: str, terms: Sequence[str]) -> str:
    """``text`` escaped, the query's words marked where they occur (case ignored)."""
    if not terms:
        return esc(text)
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    out, at = [], 0
    for m in pattern.finditer(text):
        out += [esc(text[at : m.start()]), f"<mark>{esc(m.group())}</mark>"]
        at = m.end()
    out.append(esc(text[at:]))
    return "".join(out)


def _hit(rank: int, hit: SearchHit, terms: Sequence[str]) -> str:
    date = hit.source_date.isoformat() if hit.source_date else hit.created_at.date().isoformat()
    stages = [
        [esc(STAGES.get(name, name.replace("_", " "))), num(_value(value))]
        for name, value in _ordered(hit.stage_scores)
    ]
    why = (
        '<details class="why" open><summary>Why it ranks here</summary>'
        + table(["stage", "value"], stages)
        + "</details>"
    )
    return (
        f'<article class="hit" id="hit-{rank}"><div><b>{rank}.</b> '
        f"{doc_link(hit.doc_id, hit.title, hit.chunk_index)} "
        f"<span class=muted>#{hit.chunk_index} · {esc(date)} · "
        f"{esc(hit.knowledge_type or 'no knowledge type')} · score {hit.score:.4f}</span></div>"
        f'<div class="content">{highlight(hit.content, terms)}</div>{why}</article>'
    )


def _ordered(stages: dict[str, float | int | None]) -> list[tuple[str, float | int | None]]:
    known = [(k, stages[k]) for k in STAGES if k in stages]
    return known + sorted((k, v) for k, v in stages.items() if k not in STAGES)


def _value(value: float | int | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def handed(records: Sequence[HandedRecord], *, offset: int, more: bool, spaces: str) -> str:
    """What the memory gave the agent, newest first: recall blocks and searches."""
    if not records and offset == 0:
        body = (
            '<div class="empty"><p>Nothing handed to an agent yet.</p><p>A search the agent '
            "makes over MCP (<code>hybrid_search</code>), the block the session-start hook "
            "injects (<code>memory-pipeline recall --hook</code>) and the chunks handed over "
            "with a prompt (<code>recall --prompt</code>) appear here.</p></div>"
        )
        return page("Handed to the agent", body, current="handed", spaces=spaces)
    out = []
    for r in records:
        what = {"recall": "recall block", "prompt": "with a prompt"}.get(r.kind, "search")
        head = (
            f"{esc(r.at.isoformat(timespec='seconds'))} · {what}"
            + (f" · session <code>{esc(r.session)}</code>" if r.session else "")
            + f" · space {esc(r.space)}"
        )
        query = f"<p>“{esc(r.query)}”</p>" if r.query else ""
        hits = table(
            ["#", "chunk", "score"],
            [
                [str(rank), doc_link(h.doc_id, h.title, h.chunk_index) + f" #{h.chunk_index}",
                 num(f"{h.score:.4f}")]
                for rank, h in enumerate(r.hits, 1)
            ],
        ) if r.hits else ""  # fmt: skip
        block = (
            f"<details open><summary>the block ({len(r.block)} characters)</summary>"
            f'<div class="content">{esc(r.block)}</div></details>'
            if r.block
            else ""
        )
        out.append(
            f'<article class="hit handed"><div class=muted>{head}</div>{query}{hits}{block}</article>'
        )
    body = "".join(out)
    if more:
        body += f'<p><a href="handed?{urlencode({"offset": offset + len(records)})}">Older</a></p>'
    return page("Handed to the agent", body, current="handed", spaces=spaces)


def problem(title: str, message: str, spaces: str = "") -> str:
    """A page that says what went wrong and what to do, never a traceback."""
    return page(
        title, f'<p role="alert">{esc(message)}</p><p><a href="./">Overview</a></p>', spaces=spaces
    )
