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
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from memory_pipeline.errors import InvalidInputError, MemoryPipelineError
from memory_pipeline.metadata import CONVERSATION_TAG as SESSION_TAG
from memory_pipeline.metadata import KnowledgeType
from memory_pipeline.search.params import MAX_TOP_K
from memory_pipeline.types import SearchFilters
from memory_pipeline.ui import pages
from memory_pipeline.ui.corrections import Corrections, chunks_of
from memory_pipeline.ui.forms import PAGE_SIZE, FormTokens, number
from memory_pipeline.ui.runs import last_runs

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

    from memory_pipeline.system import MemorySystem

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
        # a write without an Origin (checked above when sent) must name this page as Referer
        if scope["method"] not in SAFE_METHODS and origin is None and not _from_here(headers, host):
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


def _from_here(headers: dict[str, str], host: str) -> bool:
    """Whether a request's ``Referer`` is a page of this viewer (its scheme, host and
    port): what names a write's origin when the browser sent no ``Origin``."""
    referer = urlsplit(headers.get("referer", ""))
    return (
        bool(referer.netloc) and f"{referer.scheme}://{referer.netloc}".lower() == f"http://{host}"
    )


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


async def _refuse(scope: Scope, send: Send, status: int, title: str, message: str) -> None:
    body = pages.based(pages.problem(title, message), scope).encode()
    await _send(send, status, body, [(b"content-type", b"text/html; charset=utf-8")])


class Viewer(Corrections):
    """The pages over one memory (those that change it: ``Corrections``)."""

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
        offset = number(params.get("offset"), 0, 0, 10**9)
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
        offset = number(request.query_params.get("offset"), 0, 0, 10**9)
        with self._lock:
            records = self.system.store.handed(PAGE_SIZE + 1, offset)
        page = pages.handed(
            records[:PAGE_SIZE], offset=offset, more=len(records) > PAGE_SIZE, spaces=self.spaces
        )
        return self._html(request, page)

    def document(self, request: Request) -> Response:
        doc_id = request.path_params["doc_id"]
        focus = number(request.query_params.get("chunk"), None, 0, 10**9)
        with self._lock:
            doc = self.system.store.get_document(doc_id)
            chunks = self.system.store.document_chunks(doc_id) if doc else []
            history = self.system.store.history(HISTORY_SHOWN, doc_id=doc_id) if doc else []
            writable = doc is not None and self._writable(doc_id)
        if doc is None:
            return self._missing(request, doc_id)
        token = self.forms.issue(chunks_of(doc_id)) if writable else None
        saved = request.query_params.get("saved") == "1"
        page = pages.document(
            doc, chunks, focus, self.spaces, history, form_token=token, saved=saved
        )
        return self._html(request, page)

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
                top_k=number(chosen["top_k"] or None, 10, 1, MAX_TOP_K),
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


def _day(name: str, text: str) -> dt.date | None:
    if not text.strip():
        return None
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(f"{name}: expected a date as YYYY-MM-DD, got {text!r}") from None


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
