"""``memory-pipeline ui``: a web page over one memory, as the memory it is bound to sees it.

A Starlette app, rendered on the server (``ui/pages.py``), served by uvicorn. Who may read:

* **A token in the address.** ``memory-pipeline ui`` makes a fresh token and prints the
  address with it (as Jupyter does); the first visit trades it for a cookie (HttpOnly,
  SameSite=Strict, named after the port) and is sent on to the same page without it.
  Any request with neither gets 401, on loopback too: another user of the machine can
  reach a loopback port.
* **Host checked** against the names of the address it serves (a DNS-rebinding page
  names its own host), and an ``Origin``, when sent, must be the page's own (the same
  scheme, host and port).
* **Spaces** as the store enforces them for MCP: the memory is bound to the space
  (``--space``) and what it reads (``--read-space``); every page reads through it.

Every page reads through ``MemorySystem``, one request at a time (a lock): the searches
are those of ``hybrid_search``, and a hit's "why" is the ``stage_scores`` that search
returned, not a second computation.
"""

from __future__ import annotations

import datetime as dt
import hmac
import threading
from collections.abc import Awaitable, Callable, Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from memory_pipeline.errors import InvalidInputError, MemoryPipelineError, NotFoundError
from memory_pipeline.memory.forgetting import ForgettingRefusedError, ForgettingReport
from memory_pipeline.metadata import CONVERSATION_TAG as SESSION_TAG
from memory_pipeline.metadata import KnowledgeType
from memory_pipeline.search.params import MAX_TOP_K
from memory_pipeline.types import SearchFilters
from memory_pipeline.ui import pages
from memory_pipeline.ui.forms import FIELD as FORM_FIELD
from memory_pipeline.ui.forms import Form, FormTokens, read_form
from memory_pipeline.ui.runs import last_runs

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

    from memory_pipeline.system import MemorySystem

#: Documents a timeline page lists.
PAGE_SIZE = 50
#: The latest changes of a document its page shows.
HISTORY_SHOWN = 200
TOKEN_PARAM = "token"
#: Methods that only read: any other must come from the viewer's own page.
SAFE_METHODS = frozenset({"GET", "HEAD"})


def address(host: str, port: int, token: str, root: str = "") -> str:
    """The address a viewer prints for its pages (served under ``root``), with its token."""
    named = f"[{host}]" if ":" in host else host
    return f"http://{named}:{port}{root}/?token={token}"


def cookie_name(port: int) -> str:
    """One cookie per port: cookies do not tell ports apart, two viewers would share one."""
    return f"memory_pipeline_ui_{port}"


def hosts_for(host: str, port: int) -> set[str] | None:
    """The Host headers the viewer answers: the address it serves, and on loopback the
    loopback names; None (any) when bound to every interface, whose names it cannot know
    (the token still guards it)."""
    if host in {"0.0.0.0", "::", ""}:
        return None
    names = {host}
    if host in {"127.0.0.1", "localhost", "::1"}:
        names |= {"127.0.0.1", "localhost", "[::1]"}
    if ":" in host and not host.startswith("["):
        names.add(f"[{host}]")
    return {f"{name}:{port}" for name in names}


class Guard:
    """ASGI middleware: the Host, the Origin, then the token (in the address once, then
    in the cookie)."""

    def __init__(
        self, app: ASGIApp, *, token: str, hosts: Collection[str] | None, port: int
    ) -> None:
        self.app = app
        self._token = token.encode()
        self._hosts = None if hosts is None else {h.lower() for h in hosts}
        self._cookie = cookie_name(port)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").lower()
        if self._hosts is not None and host not in self._hosts:
            await _refuse(
                scope, send, 400, "Wrong host", "This viewer answers only the address it printed."
            )
            return
        origin = headers.get("origin")
        if origin is not None and origin.lower().removeprefix("http://") != host:
            said = "Requests from other sites are refused."
            if scope["method"] not in SAFE_METHODS:
                said += " Nothing was changed."
            await _refuse(scope, send, 403, "Refused", said)
            return
        if scope["method"] not in SAFE_METHODS and not _same_origin(headers, host):
            await _refuse(
                scope,
                send,
                403,
                "Refused",
                "A change must come from this viewer's own page (the browser names it in "
                "the request's Origin); nothing was changed.",
            )
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = next((v for k, v in query if k == TOKEN_PARAM), None)
        if given is not None and self._matches(given):
            rest = urlencode([(k, v) for k, v in query if k != TOKEN_PARAM])
            location = quote(scope["path"]) + (f"?{rest}" if rest else "")
            cookie = f"{self._cookie}={given}; HttpOnly; SameSite=Strict; Path=/"
            await _send(
                send, 303, b"", [(b"location", location.encode()), (b"set-cookie", cookie.encode())]
            )
            return
        if not self._matches(_cookie(headers.get("cookie", ""), self._cookie)):
            await _refuse(
                scope,
                send,
                401,
                "Open the printed address",
                "This viewer shows a memory to the person who started it: open the address "
                "`memory-pipeline ui` printed (it carries a token), in this browser.",
            )
            return
        await self.app(scope, receive, send)

    def _matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self._token)


def _same_origin(headers: dict[str, str], host: str) -> bool:
    """Whether a write names this viewer as where it comes from: its ``Origin`` (browsers
    send one with every POST), else its ``Referer``'s scheme, host and port."""
    origin = headers.get("origin")
    if origin is None:
        referer = urlsplit(headers.get("referer", ""))
        origin = f"{referer.scheme}://{referer.netloc}" if referer.netloc else None
    return origin is not None and origin.lower() == f"http://{host}"


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


async def _send(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def based(html: str, scope: Scope) -> str:
    """``html`` with its links relative to where the viewer is served (``root_path``)."""
    root = scope.get("root_path", "").rstrip("/")
    return (
        html.replace(f'<base href="{pages.BASE}">', f'<base href="{root}/">', 1) if root else html
    )


async def _refuse(scope: Scope, send: Send, status: int, title: str, message: str) -> None:
    body = based(pages.problem(title, message), scope).encode()
    await _send(send, status, body, [(b"content-type", b"text/html; charset=utf-8")])


class Viewer:
    """The pages over one memory."""

    def __init__(
        self, system: MemorySystem, dagster_home: Path | None = None, *, read_only: bool = False
    ) -> None:
        self.system = system
        self.dagster_home = dagster_home
        #: No forms, every write refused: asked for, or the store opened read-only.
        self.read_only = read_only or system.store.read_only
        self.forms = FormTokens()
        self._lock = threading.Lock()
        self.spaces = system.spaces.describe()
        read = system.spaces.read
        #: The spaces the timeline can be narrowed to: those the memory reads, when several.
        self.space_names = sorted(read) if read is not None and len(read) > 1 else []

    def _html(self, request: Request, body: str, status: int = 200) -> Response:
        from starlette.responses import HTMLResponse

        return HTMLResponse(based(body, request.scope), status_code=status)

    def overview(self, request: Request) -> Response:
        with self._lock:
            stats = self.system.system_stats()
            recent = self.system.store.recent_documents(10)
            sessions = self.system.store.documents_tagged([d.doc_id for d in recent], SESSION_TAG)
            days = self.system.store.chunk_days()
            n_sessions = self.system.store.count_documents_tagged(SESSION_TAG)
        runs = last_runs(self.dagster_home)
        page = pages.overview(
            stats, recent, days, sessions=sessions, runs=runs, n_sessions=n_sessions
        )
        return self._html(request, page)

    def timeline(self, request: Request) -> Response:
        params = request.query_params
        offset = _int(params.get("offset"), 0, 0, 10**9)
        chosen = {k: params.get(k, "") for k in ("kind", "knowledge_type", "tag", "space")}
        tags = [
            t for t in (chosen["tag"], SESSION_TAG if chosen["kind"] == "sessions" else "") if t
        ]
        space = chosen["space"] or None
        if space is not None and not self.system.spaces.reads(space):
            # the same words whether or not such a space exists elsewhere in the store
            message = f"This page reads {self.spaces}; {space!r} is not one of them."
            return self._html(request, pages.problem("Not a space here", message, self.spaces), 404)
        with self._lock:
            docs = self.system.store.recent_documents(
                PAGE_SIZE + 1,
                offset,
                tags=tags,
                without_tag=SESSION_TAG if chosen["kind"] == "documents" else None,
                knowledge_type=chosen["knowledge_type"] or None,
                space=space,
            )
            ids = [d.doc_id for d in docs]
            sessions = self.system.store.documents_tagged(ids, SESSION_TAG)
            spaces = self.system.store.spaces_of(ids) if self.space_names else {}
        page = pages.timeline(
            docs[:PAGE_SIZE],
            offset=offset,
            more=len(docs) > PAGE_SIZE,
            spaces=self.spaces,
            chosen=chosen,
            sessions=sessions,
            kinds=[k.value for k in KnowledgeType],
            space_names=self.space_names,
            doc_spaces=spaces,
        )
        return self._html(request, page)

    def handed(self, request: Request) -> Response:
        offset = _int(request.query_params.get("offset"), 0, 0, 10**9)
        with self._lock:
            records = self.system.store.handed(PAGE_SIZE + 1, offset)
        page = pages.handed(
            records[:PAGE_SIZE], offset=offset, more=len(records) > PAGE_SIZE, spaces=self.spaces
        )
        return self._html(request, page)

    def proposals(self, request: Request) -> Response:
        """The agent's changes waiting for a person's verdict."""
        offset = _int(request.query_params.get("offset"), 0, 0, 10**9)
        with self._lock:
            changes = self.system.proposals(PAGE_SIZE + 1, offset)
            shown = changes[:PAGE_SIZE]
            titles = {
                doc_id: title
                for doc_id, (title, _) in self.system.document_labels(
                    c.doc_id for c in shown
                ).items()
            }
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
        page = pages.proposals(
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
        from starlette.concurrency import run_in_threadpool

        change_id = int(request.path_params["change_id"])
        form = await self._form(request, PROPOSALS)
        if not isinstance(form, dict):
            return form
        decision = form.get("decision", "")
        try:
            await run_in_threadpool(self._review, change_id, decision)
        except MemoryPipelineError as exc:
            return self._refused(request, str(exc), 400)
        root = request.scope.get("root_path", "").rstrip("/")
        return _redirect(f"{root}/proposals?done={quote(decision)}")

    def _review(self, change_id: int, decision: str) -> None:
        with self._lock:
            self.system.review_change(change_id, decision, actor="page")

    def forgetting(self, request: Request) -> Response:
        """The forgetting batch's dry run, its lowest candidates to tick."""
        with self._lock:
            report = self.system.run_forgetting_batch(dry_run=True, examples=CANDIDATES_SHOWN)
            titles = self._titles(c.doc_id for c in report.examples)
        token = None if self.read_only else self.forms.issue(FORGETTING)
        page = pages.forgetting(report, titles, spaces=self.spaces, token=token)
        return self._html(request, page)

    def _titles(self, doc_ids: Iterable[str]) -> dict[str, str]:
        labels = self.system.document_labels(doc_ids)
        return {doc_id: title for doc_id, (title, _) in labels.items()}

    async def forget(self, request: Request) -> Response:
        """Archive the ticked candidates: the forgetting batch itself, a real run limited
        to them (``MemorySystem.run_forgetting_batch(chosen=…)``)."""
        from starlette.concurrency import run_in_threadpool

        form = await self._form(request, FORGETTING)
        if not isinstance(form, Form):
            return form
        try:
            picked = _chunk_ids(form)
            report = await run_in_threadpool(self._forget, picked)
        except MemoryPipelineError as exc:
            return self._refused(request, str(exc), 400)
        return self._html(request, pages.forgotten(report, len(picked), self.spaces))

    def _forget(self, picked: list[int]) -> ForgettingReport:
        with self._lock:
            try:
                return self.system.run_forgetting_batch(dry_run=False, chosen=picked)
            except ForgettingRefusedError:
                dry = self.system.run_forgetting_batch(dry_run=True, examples=0)
                raise InvalidInputError(
                    f"You ticked {len(picked)} chunks; one run may archive at most "
                    f"{dry.limit} chunks, {dry.params['max_fraction']:.0%} of the memory "
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
        page = pages.archive(
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
        from starlette.concurrency import run_in_threadpool

        form = await self._form(request, RESTORING)
        if not isinstance(form, Form):
            return form
        try:
            picked = _chunk_ids(form)
            restored = await run_in_threadpool(self._restore, picked)
        except MemoryPipelineError as exc:
            return self._refused(request, str(exc), 400)
        root = request.scope.get("root_path", "").rstrip("/")
        return _redirect(f"{root}/archive?restored={restored}")

    def _restore(self, picked: list[int]) -> int:
        with self._lock:
            return self.system.restore_archived(chunk_ids=picked).restored

    def document(self, request: Request) -> Response:
        doc_id = request.path_params["doc_id"]
        focus = _int(request.query_params.get("chunk"), None, 0, 10**9)
        with self._lock:
            doc = self.system.store.get_document(doc_id)
            chunks = self.system.store.document_chunks(doc_id) if doc else []
            history = self.system.store.history(HISTORY_SHOWN, doc_id=doc_id) if doc else []
            writable = doc is not None and self._writable(doc_id)
        if doc is None:
            return self._missing(request, doc_id)
        token = self.forms.issue(_chunks_of(doc_id)) if writable else None
        saved = request.query_params.get("saved") == "1"
        page = pages.document(
            doc, chunks, focus, self.spaces, history, form_token=token, saved=saved
        )
        return self._html(request, page)

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

    async def edit_chunk(self, request: Request) -> Response:
        """A chunk's importance, knowledge type and tags from its form: only the fields the
        person changed (each sent beside what the page showed), through
        ``MemorySystem.set_chunk_tags`` as the MCP tool does, recorded as the page's."""
        from starlette.concurrency import run_in_threadpool

        doc_id = request.path_params["doc_id"]
        index = int(request.path_params["index"])
        form = await self._form(request, _chunks_of(doc_id))
        if not isinstance(form, dict):
            return form
        try:
            changes = _changed_fields(form)
            if changes:
                await run_in_threadpool(self._set_chunk, doc_id, index, changes)
        except MemoryPipelineError as exc:
            return self._refused(request, str(exc), 400)
        root = request.scope.get("root_path", "").rstrip("/")
        location = f"{root}/documents/{quote(doc_id)}?chunk={index}&saved=1#chunk-{index}"
        return _redirect(location)

    def _set_chunk(self, doc_id: str, index: int, changes: dict[str, Any]) -> None:
        with self._lock:
            self.system.set_chunk_tags(doc_id, index, **changes, actor="page")

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
        page = pages.confirm_delete(
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
        from starlette.concurrency import run_in_threadpool

        doc_id = request.path_params["doc_id"]
        form = await self._form(request, _deleting(doc_id))
        if not isinstance(form, dict):
            return form
        with self._lock:
            doc = self.system.store.get_document(doc_id)
        if doc is None:
            return self._missing(request, doc_id)
        try:
            removed, index_error = await run_in_threadpool(self._delete, doc_id)
        except MemoryPipelineError as exc:
            return self._refused(request, str(exc), 400)
        page = pages.deleted(doc, removed, index_error, self.spaces)
        return self._html(request, page)

    def _delete(self, doc_id: str) -> tuple[int, str | None]:
        with self._lock:
            removed = self.system.delete_document(doc_id, actor="page")
            try:
                self.system.update_index()
            except (MemoryPipelineError, OSError) as exc:
                return removed, str(exc)
        return removed, None

    def search(self, request: Request) -> Response:
        """``hybrid_search``'s request from the form: the query, other phrasings (one a
        line), tags (comma-separated, all required), knowledge types (any), a window of
        source dates, the memory axis, MMR, how many."""
        params = request.query_params
        query = params.get("q", "")
        kinds = params.getlist("knowledge_type")
        chosen: dict[str, Any] = {
            k: params.get(k, "")
            for k in ("top_k", "tags", "from", "to", "rewrites", "memory", "diversify")
        }
        chosen["knowledge_type"] = kinds
        if not query.strip():
            return self._html(request, pages.search(query, None, "", self.spaces, chosen))
        try:
            filters = SearchFilters(
                tags=tuple(t.strip() for t in chosen["tags"].split(",") if t.strip()),
                knowledge_types=tuple(kinds),
                source_date_from=_day("from", chosen["from"]),
                source_date_to=_day("to", chosen["to"]),
            )
            rewrites = [line.strip() for line in chosen["rewrites"].splitlines() if line.strip()]
            search_request = self.system.settings.search_request(
                top_k=_int(chosen["top_k"] or None, 10, 1, MAX_TOP_K),
                record_access=False,  # looking at the memory is not using it
                enable_memory_rerank=chosen["memory"] == "on",
                enable_mmr=chosen["diversify"] == "on",
            )
            with self._lock:
                result = self.system.query(
                    query,
                    search_request,
                    filters=None if filters.is_empty() else filters,
                    rewrites=rewrites,
                )
        except MemoryPipelineError as exc:
            page = pages.search(query, None, str(exc), self.spaces, chosen)
            return self._html(request, page, 400)
        return self._html(request, pages.search(query, result, "", self.spaces, chosen))


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


def _chunks_of(doc_id: str) -> str:
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


def _redirect(location: str) -> Response:
    from starlette.responses import RedirectResponse

    return RedirectResponse(location, status_code=303)


def _day(name: str, text: str) -> dt.date | None:
    if not text.strip():
        return None
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(f"{name}: expected a date as YYYY-MM-DD, got {text!r}") from None


def _int(text: str | None, default: Any, low: int, high: int) -> Any:
    try:
        return min(max(int(text), low), high) if text is not None else default
    except ValueError:
        return default


def build_app(
    system: MemorySystem,
    *,
    token: str,
    host: str,
    port: int,
    dagster_home: Path | None = None,
    read_only: bool = False,
) -> ASGIApp:
    """The viewer over ``system``, behind ``Guard``; the overview lists the last runs of
    the pipeline whose Dagster home is ``dagster_home`` (``ui/runs.py``); ``read_only``:
    pages without forms, every write refused."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    viewer = Viewer(system, dagster_home, read_only=read_only)
    writes: list[tuple[str, Callable[[Request], Awaitable[Response]]]] = [
        ("/documents/{doc_id}/chunks/{index:int}", viewer.edit_chunk),
        ("/documents/{doc_id}/delete", viewer.delete),
        ("/proposals/{change_id:int}", viewer.review),
        ("/forgetting", viewer.forget),
        ("/archive/restore", viewer.restore),
    ]
    handlers: list[tuple[str, Callable[[Request], Response]]] = [
        ("/", viewer.overview),
        ("/documents", viewer.timeline),
        ("/documents/{doc_id}/delete", viewer.confirm_delete),
        ("/documents/{doc_id:path}", viewer.document),
        ("/search", viewer.search),
        ("/handed", viewer.handed),
        ("/proposals", viewer.proposals),
        ("/forgetting", viewer.forgetting),
        ("/archive", viewer.archive),
    ]
    routes = [Route(path, handler, methods=["POST"]) for path, handler in writes]
    routes += [Route(path, handler) for path, handler in handlers]
    app: Starlette = Starlette(routes=routes)

    async def not_found(request: Request, exc: Exception) -> Response:
        return viewer._html(
            request, pages.problem("Not found", "No such page.", viewer.spaces), 404
        )

    async def failed(request: Request, exc: Exception) -> Response:
        message = f"The memory could not answer: {exc}"
        return viewer._html(
            request, pages.problem("Something went wrong", message, viewer.spaces), 500
        )

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(Exception, failed)
    return Guard(app, token=token, hosts=hosts_for(host, port), port=port)
