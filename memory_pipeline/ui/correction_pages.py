"""The viewer's pages that change the memory, as HTML (``corrections.py`` serves them):
what deleting a document takes, what it did; the agent's changes to judge; the
forgetting batch's candidates to tick, what archiving did; the archive to search and
restore from. Every form carries its token (``pages.token_field``); a read-only page (no
token) shows the same without forms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from memory_pipeline.locations import shown
from memory_pipeline.memory.forgetting import ForgettingReport
from memory_pipeline.store.history import Change
from memory_pipeline.types import ChunkRecord, DocumentInfo
from memory_pipeline.ui.pages import doc_link, esc, num, page, table, token_field


def confirm_delete(
    doc: DocumentInfo, *, chunks: int, vectors: int, archived: int, spaces: str, token: str
) -> str:
    """What deleting ``doc`` takes and what it leaves, and the button that does it."""
    goes = [
        f"its {chunks} chunk{'s' * (chunks != 1)}: their texts, memory fields and tags",
        f"their {vectors} stored vector{'s' * (vectors != 1)}",
        "its entries in the search index (updated right after)",
    ]
    stays = [
        f"{archived} of its chunks forgotten earlier, in the forgetting archive "
        "(restoring them brings the document back)"
        if archived
        else "nothing of it in the forgetting archive (none of its chunks was forgotten)",
        "the record of this deletion and of every earlier change, in the history",
        "what it was stored from, outside the memory: the same text or session stored "
        "again comes back"
        if doc.source.startswith("text:")
        else f"the file itself ({shown(Path(doc.source))}): ingesting it again, or a "
        "sources sync that watches its folder, stores it again",
    ]
    body = (
        f"<p>Deleting <b>{esc(doc.title or doc.doc_id)}</b> removes, for good:</p>"
        f"<ul>{''.join(f'<li>{esc(g)}</li>' for g in goes)}</ul>"
        f"<p>It leaves:</p><ul>{''.join(f'<li>{esc(x)}</li>' for x in stays)}</ul>"
        f'<form class="delete" method="post" action="documents/{esc(doc.doc_id)}/delete">'
        f"{token_field(token)}<button>Delete this document</button> "
        f"{doc_link(doc.doc_id, 'Keep it')}</form>"
    )
    return page(f"Delete {doc.title or doc.doc_id}?", body, spaces=spaces)


def deleted(doc: DocumentInfo, removed: int, index_error: str | None, spaces: str) -> str:
    """What a deletion did."""
    index = (
        "The search index is updated: no search finds it."
        if index_error is None
        else f"The search index could not be updated ({index_error}); searches leave its "
        "chunks out already, and the next index update takes them out."
    )
    body = (
        f'<p role="status">Deleted <b>{esc(doc.title or doc.doc_id)}</b>: {removed} '
        f"chunk{'s' * (removed != 1)}.</p><p>{esc(index)}</p>"
        '<p><a href="documents">Timeline</a></p>'
    )
    return page("Deleted", body, spaces=spaces)


def proposals(
    changes: Sequence[Change],
    chunks: Mapping[tuple[str, int], ChunkRecord],
    titles: Mapping[str, str],
    *,
    offset: int,
    more: bool,
    spaces: str,
    token: str | None,
    done: str = "",
) -> str:
    """The agent's changes no person has reviewed, newest first, each with its chunk's
    text now and, with ``token`` (the page may write), Accept and Revert."""
    said = f'<p class="saved" role="status">{esc(done)}</p>' if done else ""
    if not changes and offset == 0:
        body = said + (
            '<div class="empty"><p>Nothing to review.</p><p>When the agent sets a chunk\'s '
            "importance, knowledge type or tags over MCP (<code>set_chunk_tags</code>), the "
            "change is listed here until you accept or revert it.</p></div>"
        )
        return page("The agent's changes", body, current="proposals", spaces=spaces)
    out = [said]
    for c in changes:
        index = c.chunk_index if c.chunk_index is not None else 0
        chunk = chunks.get((c.doc_id, index))
        where = doc_link(c.doc_id, titles.get(c.doc_id), index) + f" #{index}"
        text = (
            f'<div class="content">{esc(_excerpt(chunk.content))}</div>'
            if chunk
            else "<p class=muted>(its chunk is gone: deleted or forgotten)</p>"
        )
        buttons = (
            f'<form class="edit" method="post" action="proposals/{c.id}">'
            f"{token_field(token)}"
            '<button name="decision" value="accept">Accept</button>'
            '<button name="decision" value="revert">Revert</button></form>'
            if token is not None
            else ""
        )
        out.append(
            f'<article class="hit proposal" id="change-{c.id}"><div class=muted>'
            f"{esc(f'{c.at:%Y-%m-%d %H:%M}')} · {esc(c.actor)} · space {esc(c.space)}</div>"
            f"<p>{where}: <b>{esc(c.what)}</b></p>{text}{buttons}</article>"
        )
    body = "".join(out)
    if more:
        body += (
            f'<p><a href="proposals?{urlencode({"offset": offset + len(changes)})}">Older</a></p>'
        )
    return page("The agent's changes", body, current="proposals", spaces=spaces)


def forgetting(
    report: ForgettingReport,
    titles: Mapping[str, str],
    *,
    spaces: str,
    token: str | None,
) -> str:
    """The forgetting batch's dry run: its knobs, its counts, and its candidates lowest
    first (the batch's own scores and reasons), each to tick; with ``token`` the button
    that archives the ticked ones."""
    p = report.params
    knobs = table(
        ["", ""],
        [
            [esc(name), esc(p.get(key))]
            for name, key in (
                ("time weight", "time_weight"),
                ("access weight", "freq_weight"),
                ("importance below which a chunk is cut", "importance_threshold"),
                ("score below which a chunk is a candidate", "score_threshold"),
                ("days a new chunk is spared", "grace_days"),
                ("most of the memory one run may take", "max_fraction"),
            )
        ],
    )
    share = report.candidates / report.live_chunks if report.live_chunks else 0.0
    head = (
        f"<p>{report.candidates} of {report.live_chunks} chunks are candidates ({share:.1%}); "
        f"a run may archive at most {report.limit} of them. The scores are the forgetting "
        "batch's own (<code>memory-pipeline forget</code>, the pipeline's weekly report), "
        "from its dry run now; nothing is archived until you tick chunks and press the button "
        "(or opt in to the pipeline's weekly archiving).</p>"
        f"<details><summary>The settings</summary>{knobs}</details>"
    )
    if not report.examples:
        body = head + '<div class="empty"><p>No chunk is a candidate now.</p></div>'
        return page("Forgetting", body, current="forgetting", spaces=spaces)
    rows = []
    for c in report.examples:
        box = (
            f'<input type="checkbox" name="chunk" value="{c.chunk_id}" '
            f'aria-label="archive chunk {c.chunk_index} of {esc(titles.get(c.doc_id, c.doc_id))}">'
            if token is not None
            else ""
        )
        rows.append(
            [box, num("cut" if c.score is None else f"{c.score:.3g}"), esc(c.reason),
             doc_link(c.doc_id, titles.get(c.doc_id), c.chunk_index) + f" #{c.chunk_index}",
             esc(c.knowledge_type or ""), num(f"{c.age_days:.0f}"), esc(c.snippet)]
        )  # fmt: skip
    listed = table(["", "score", "why", "chunk", "knowledge type", "age (days)", "text"], rows)
    more = (
        f"<p class=muted>The {len(report.examples)} lowest of {report.candidates} are listed.</p>"
        if report.candidates > len(report.examples)
        else ""
    )
    if token is None:
        return page("Forgetting", head + listed + more, current="forgetting", spaces=spaces)
    form = (
        f'<form method="post" action="forgetting">'
        f"{token_field(token)}{listed}{more}"
        "<p><button>Archive the ticked chunks</button> "
        "<span class=muted>(they leave the memory for the archive, where they can be "
        "restored)</span></p></form>"
    )
    return page("Forgetting", head + form, current="forgetting", spaces=spaces)


def forgotten(report: ForgettingReport, picked: int, spaces: str) -> str:
    """What archiving the ticked chunks did."""
    left = picked - report.archived
    index = (
        f"The search index is updated (version {report.index_version})."
        if report.index_error is None
        else f"The search index could not be updated ({report.index_error}); searches "
        "leave the chunks out already, and the next index update takes them out."
    )
    body = (
        f'<p role="status">Archived {report.archived} chunk{"s" * (report.archived != 1)} '
        f"(run <code>{esc(report.run_id)}</code>).</p>"
        + (
            f"<p>{left} of the ticked chunks were no longer candidates (read or changed "
            "since the list was made) and stay.</p>"
            if left
            else ""
        )
        + f'<p>{esc(index)}</p><p><a href="archive">The archive</a> · '
        '<a href="forgetting">Forgetting</a></p>'
    )
    return page("Archived", body, current="forgetting", spaces=spaces)


def archive(
    records: Sequence[dict[str, Any]],
    *,
    total: int,
    query: str,
    spaces: str,
    token: str | None,
    restorable: Callable[[dict[str, Any]], bool],
    done: str = "",
) -> str:
    """The chunks archived now (newest first), narrowed to those whose text holds
    ``query``; with ``token`` a box to tick on each this memory may restore."""
    said = f'<p class="saved" role="status">{esc(done)}</p>' if done else ""
    search = (
        '<form class="search" method="get" action="archive">'
        f'<input type="search" name="q" value="{esc(query)}" '
        'placeholder="words in an archived chunk" aria-label="search the archive">'
        "<button>Search the archive</button></form>"
    )
    if not records:
        empty = "Nothing archived holds those words." if query else "Nothing is archived."
        body = said + search + f'<div class="empty"><p>{empty}</p></div>'
        return page("Archive", body, current="archive", spaces=spaces)
    out = []
    for r in records:
        title = (r.get("document") or {}).get("title") or r["doc_id"]
        box = (
            f'<label><input type="checkbox" name="chunk" value="{int(r["chunk_id"])}"> '
            "restore</label>"
            if token is not None and restorable(r)
            else ""
        )
        score = "cut" if r.get("score") is None else f"{r['score']:.3g}"
        out.append(
            f'<article class="hit archived"><div class=muted>{box} archived '
            f"{esc(str(r.get('archived_at', ''))[:16])} · {esc(r.get('reason'))} · score "
            f"{esc(score)} · run {esc(r.get('run_id'))} · space {esc(r.get('space'))}</div>"
            f"<p><b>{esc(title)}</b> #{int(r['chunk_index'])}</p>"
            f'<div class="content">{esc(_excerpt(str(r.get("content", ""))))}</div></article>'
        )
    shown = (
        f"<p class=muted>{len(records)} of {total} archived chunks"
        + (f" holding “{esc(query)}”" if query else "")
        + ".</p>"
    )
    listed = "".join(out)
    if token is None:
        return page("Archive", said + search + shown + listed, current="archive", spaces=spaces)
    form = (
        f'<form method="post" action="archive/restore">'
        f"{token_field(token)}{listed}"
        "<p><button>Restore the ticked chunks</button></p></form>"
    )
    return page("Archive", said + search + shown + form, current="archive", spaces=spaces)


def _excerpt(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
