"""The viewer's pages that change the memory (``Viewer``'s, ``app.py``): a chunk's
memory fields, deleting a document, the agent's changes to accept or revert, forgetting
the ticked candidates, and restoring from the archive.

Each write goes through ``MemorySystem`` as the MCP tools and the commands do, and is
taken only from a form this run handed out (``forms.py``), from the viewer's own page
(``app.Guard``), on a page that is not read-only; a refused one changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from memory_pipeline.errors import InvalidInputError, MemoryPipelineError, NotFoundError
from memory_pipeline.memory.forgetting import ForgettingRefusedError, ForgettingReport
from memory_pipeline.metadata import is_kept_tag
from memory_pipeline.ui import correction_pages, pages
from memory_pipeline.ui.forms import FIELD as FORM_FIELD
from memory_pipeline.ui.forms import PAGE_SIZE, Form, FormTokens, number, read_form

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from memory_pipeline.system import MemorySystem
    from memory_pipeline.types import DocumentInfo

T = TypeVar("T")

#: The purpose of the review page's form token.
PROPOSALS = "proposals"
#: What the review page says after a verdict.
REVIEWED = {
    "accept": "Accepted: the agent's change stands.",
    "revert": "Reverted: the field is back to what it was.",
}


#: The purposes of the forgetting page's and the archive's form tokens.
FORGETTING = "forgetting"
RESTORING = "restore"
#: Candidates the forgetting page lists (the lowest first), archived chunks the archive's.
CANDIDATES_SHOWN = 200
ARCHIVE_SHOWN = 200


def _chunk_ids(form: Form) -> list[int]:
    """The ticked chunks of a list's form."""
    try:
        picked = [int(v) for v in form.getlist("chunk")]
    except ValueError:
        raise InvalidInputError("a ticked chunk's id is not a number") from None
    if not picked:
        raise InvalidInputError("no chunk was ticked: tick the chunks first")
    return picked


def chunks_of(doc_id: str) -> str:
    return f"chunks:{doc_id}"


def _deleting(doc_id: str) -> str:
    return f"delete:{doc_id}"


def _changed_fields(form: dict[str, str]) -> dict[str, Any]:
    """The memory fields whose value differs from what the page showed (``was_…``): a
    field the person left alone is not sent, so a change made meanwhile (by the agent)
    to another field stands. An empty importance or knowledge type unsets it."""
    changes: dict[str, Any] = {}
    importance = form.get("importance", "").strip()
    if importance != form.get("was_importance", "").strip():
        try:
            changes["importance"] = float(importance) if importance else None
        except ValueError:
            raise InvalidInputError(
                f"importance: expected a number from 0 to 1, or nothing to unset it; got "
                f"{importance!r}"
            ) from None
    kind = form.get("knowledge_type", "").strip()
    if kind != form.get("was_knowledge_type", "").strip():
        changes["knowledge_type"] = kind or None
    tags = _tags(form.get("tags", ""))
    if tags != _tags(form.get("was_tags", "")):
        changes["tags"] = tags
    return changes


def _tags(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _back(request: Request, path: str) -> Response:
    """303 to ``path`` under where the viewer is served (after a write: a fresh page)."""
    from starlette.responses import RedirectResponse

    root = request.scope.get("root_path", "").rstrip("/")
    return RedirectResponse(f"{root}{path}", status_code=303)


class Corrections:
    """The writing half of the viewer: what ``Viewer.__init__`` sets, these use."""

    system: MemorySystem
    read_only: bool
    forms: FormTokens
    spaces: str
    _lock: threading.Lock

    def _html(self, request: Request, body: str, status: int = 200) -> Response:
        from starlette.responses import HTMLResponse

        return HTMLResponse(pages.based(body, request.scope), status_code=status)

    def proposals(self, request: Request) -> Response:
        """The agent's changes waiting for a person's verdict."""
        offset = number(request.query_params.get("offset"), 0, 0, 10**9)
        with self._lock:
            changes = self.system.proposals(PAGE_SIZE + 1, offset)
            shown = changes[:PAGE_SIZE]
            titles = self._titles(c.doc_id for c in shown)
            chunks = {}
            for c in shown:
                if c.chunk_index is not None and (c.doc_id, c.chunk_index) not in chunks:
                    try:
                        found = self.system.store.document_window(c.doc_id, c.chunk_index, 0)
                    except NotFoundError:  # deleted or forgotten since: the page says so
                        continue
                    chunks.update({(r.doc_id, r.chunk_index): r for r in found})
        done = REVIEWED.get(request.query_params.get("done", ""), "")
        token = None if self.read_only else self.forms.issue(PROPOSALS)
        page = correction_pages.proposals(
            shown,
            chunks,
            titles,
            offset=offset,
            more=len(changes) > PAGE_SIZE,
            spaces=self.spaces,
            token=token,
            done=done,
        )
        return self._html(request, page)

    async def review(self, request: Request) -> Response:
        """Accept or revert one of the agent's changes (``MemorySystem.review_change``,
        a revert recorded as the page's)."""
        change_id = int(request.path_params["change_id"])

        def act(form: Form) -> str:
            decision = form.get("decision", "")
            self.system.review_change(change_id, decision, actor="page")
            return decision

        def answer(decision: str) -> Response:
            return _back(request, f"/proposals?done={quote(decision)}")

        return await self._write(request, PROPOSALS, act, answer)

    def forgetting(self, request: Request) -> Response:
        """The forgetting batch's dry run, its lowest candidates to tick."""
        with self._lock:
            report = self.system.run_forgetting_batch(dry_run=True, examples=CANDIDATES_SHOWN)
            titles = self._titles(c.doc_id for c in report.examples)
        token = None if self.read_only else self.forms.issue(FORGETTING)
        page = correction_pages.forgetting(report, titles, spaces=self.spaces, token=token)
        return self._html(request, page)

    def _titles(self, doc_ids: Iterable[str]) -> dict[str, str]:
        labels = self.system.document_labels(doc_ids)
        return {doc_id: title for doc_id, (title, _) in labels.items()}

    async def forget(self, request: Request) -> Response:
        """Archive the ticked candidates: the forgetting batch itself, a real run limited
        to them (``MemorySystem.run_forgetting_batch(chosen=…)``)."""

        def act(form: Form) -> tuple[ForgettingReport, int]:
            picked = _chunk_ids(form)
            return self._forget(picked), len(picked)

        def answer(done: tuple[ForgettingReport, int]) -> Response:
            return self._html(request, correction_pages.forgotten(*done, self.spaces))

        return await self._write(request, FORGETTING, act, answer)

    def _forget(self, picked: list[int]) -> ForgettingReport:
        try:
            return self.system.run_forgetting_batch(dry_run=False, chosen=picked)
        except ForgettingRefusedError as exc:
            raise InvalidInputError(
                f"You ticked {len(picked)} chunks; one run may archive at most "
                f"{exc.limit} chunks, {exc.max_fraction:.0%} of the memory "
                "(HYBRID_RAG_FORGET_MAX_FRACTION). Tick fewer."
            ) from None

    def archive(self, request: Request) -> Response:
        """The chunks archived now in the spaces this page reads, newest first, narrowed
        to those holding the words asked for."""
        from memory_pipeline.memory.archive import archived_records, record_space

        query = request.query_params.get("q", "").strip()
        spaces = self.system.spaces
        with self._lock:
            held = [
                r
                for r in archived_records(self.system.store, self.system.archive_file)
                if spaces.reads(record_space(r))
            ]
        words = query.casefold()
        found = [r for r in held if words in str(r.get("content", "")).casefold()]
        found.sort(key=lambda r: str(r.get("archived_at", "")), reverse=True)
        done = request.query_params.get("restored", "")
        page = correction_pages.archive(
            found[:ARCHIVE_SHOWN],
            total=len(held),
            query=query,
            spaces=self.spaces,
            token=None if self.read_only else self.forms.issue(RESTORING),
            restorable=lambda r: spaces.may_write(record_space(r)),
            done=f"Restored {done} chunk{'s' * (done != '1')}." if done.isdigit() else "",
        )
        return self._html(request, page)

    async def restore(self, request: Request) -> Response:
        """Bring the ticked archived chunks back (``MemorySystem.restore_archived``)."""

        def act(form: Form) -> int:
            return self.system.restore_archived(chunk_ids=_chunk_ids(form)).restored

        def answer(restored: int) -> Response:
            return _back(request, f"/archive?restored={restored}")

        return await self._write(request, RESTORING, act, answer)

    def _missing(self, request: Request, doc_id: str) -> Response:
        message = f"No document {doc_id!r} in this memory (it may have been deleted or forgotten)."
        return self._html(request, pages.problem("Not found", message, self.spaces), 404)

    def _writable(self, doc_id: str) -> bool:
        """Whether this page may change ``doc_id``: not read-only, and the document is in
        the space the memory writes (one it only reads is shown without forms)."""
        if self.read_only:
            return False
        return self.system.store.spaces_of([doc_id]).get(doc_id) == self.system.spaces.write

    def _refused(self, request: Request, message: str, status: int = 403) -> Response:
        page = pages.problem("Not changed", f"{message} Nothing was changed.", self.spaces)
        return self._html(request, page, status)

    async def _form(self, request: Request, purpose: str) -> Form | Response:
        """The form of a write, or the refusal: a read-only page, no form token issued for
        ``purpose`` (missing, stale, used, another page's)."""
        if self.read_only:
            return self._refused(
                request, "This page is read-only (memory-pipeline ui --read-only)."
            )
        form = read_form(await request.body())
        if not self.forms.take(form.get(FORM_FIELD), purpose):
            return self._refused(
                request,
                "This form is stale or was not sent by this page: reload the page and try again.",
            )
        return form

    async def _write(
        self,
        request: Request,
        purpose: str,
        act: Callable[[Form], T],
        answer: Callable[[T], Response],
    ) -> Response:
        """A write from a page's form: refused before anything is read (``_form``), else
        ``act`` in a worker thread under the viewer's lock — a refusal it raises changes
        nothing and is the answer — then ``answer`` with what it returned."""
        from starlette.concurrency import run_in_threadpool

        form = await self._form(request, purpose)
        if not isinstance(form, Form):
            return form
        try:
            done = await run_in_threadpool(self._locked, act, form)
        except MemoryPipelineError as exc:
            return self._refused(request, str(exc), 400)
        return answer(done)

    def _locked(self, act: Callable[[Form], T], form: Form) -> T:
        with self._lock:
            return act(form)

    async def edit_chunk(self, request: Request) -> Response:
        """A chunk's importance, knowledge type and tags from its form: only the fields the
        person changed (each sent beside what the page showed), through
        ``MemorySystem.set_chunk_tags`` as the MCP tool does, recorded as the page's."""
        doc_id = request.path_params["doc_id"]
        index = int(request.path_params["index"])

        def act(form: Form) -> None:
            changes = _changed_fields(form)
            if "tags" in changes:  # the field holds the person's tags; a session's marks stay
                [chunk] = self.system.get_document_chunks(doc_id, index, window=0)
                kept = [t for t in chunk.tags if is_kept_tag(t)]
                changes["tags"] = list(dict.fromkeys([*kept, *changes["tags"]]))
            if changes:
                self.system.set_chunk_tags(doc_id, index, **changes, actor="page")

        def answer(_: None) -> Response:
            return _back(request, f"/documents/{quote(doc_id)}?chunk={index}&saved=1#chunk-{index}")

        return await self._write(request, chunks_of(doc_id), act, answer)

    def confirm_delete(self, request: Request) -> Response:
        """What deleting a document takes and what it leaves, and the button."""
        doc_id = request.path_params["doc_id"]
        with self._lock:
            doc = self.system.store.get_document(doc_id)
            writable = doc is not None and self._writable(doc_id)
            footprint = self.system.store.document_footprint(doc_id) if writable else (0, 0)
            archived = self._archived_chunks(doc_id) if writable else 0
        if doc is None:
            return self._missing(request, doc_id)
        if not writable:
            why = "read-only" if self.read_only else "in a space this memory only reads"
            return self._refused(request, f"This document cannot be deleted here: it is {why}.")
        chunks, vectors = footprint
        token = self.forms.issue(_deleting(doc_id))
        page = correction_pages.confirm_delete(
            doc, chunks=chunks, vectors=vectors, archived=archived, spaces=self.spaces, token=token
        )
        return self._html(request, page)

    def _archived_chunks(self, doc_id: str) -> int:
        from memory_pipeline.memory.archive import archived_records

        path = self.system.archive_file
        return sum(1 for r in archived_records(self.system.store, path) if r["doc_id"] == doc_id)

    async def delete(self, request: Request) -> Response:
        """Delete the document (``MemorySystem.delete_document``, recorded as the page's),
        then take it out of the index; an index that fails to update is reported, the
        deletion stands (as the MCP tool does)."""
        doc_id = request.path_params["doc_id"]

        def act(form: Form) -> tuple[DocumentInfo, int, str | None]:
            doc = self.system.store.get_document(doc_id)
            if doc is None:
                raise NotFoundError(f"No document {doc_id!r} in this memory (deleted already?).")
            removed = self.system.delete_document(doc_id, actor="page")
            try:
                self.system.update_index()
            except (MemoryPipelineError, OSError) as exc:
                return doc, removed, str(exc)
            return doc, removed, None

        def answer(done: tuple[DocumentInfo, int, str | None]) -> Response:
            return self._html(request, correction_pages.deleted(*done, self.spaces))

        return await self._write(request, _deleting(doc_id), act, answer)
