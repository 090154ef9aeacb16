"""What a request to the viewer's pages carries: a number in the address, a form's
fields, and for a write the form token the page handed out.

Each page with a form gets a fresh token for what its forms may do (``purpose``: the
chunks of one document, deleting one document, the agent's changes, forgetting,
restoring), kept by this run of the viewer.
A write is taken only with a token issued for its purpose, once: a token from another
page, an earlier run of the viewer, one already used or older than ``LIFETIME`` is
stale, and the write is refused before anything is read from the store. With the
same-origin check (``app.Guard``) and the SameSite=Strict cookie, a page of another site
cannot make the browser change the memory.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

#: Rows a listing page shows (documents, records, changes).
PAGE_SIZE = 50
#: The name of the form field that carries the token.
FIELD = "form_token"
#: Seconds a form stays good for.
LIFETIME = 3600.0
#: Tokens kept at most; the oldest go first (a page left open that long reloads).
KEPT = 10_000


class FormTokens:
    """The tokens this run handed out, each for one purpose, each good once."""

    def __init__(
        self,
        *,
        lifetime: float = LIFETIME,
        kept: int = KEPT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._issued: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._lifetime = lifetime
        self._kept = kept
        self._clock = clock

    def issue(self, purpose: str) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._issued[token] = (purpose, self._clock())
            while len(self._issued) > self._kept:
                self._issued.popitem(last=False)
        return token

    def take(self, token: str | None, purpose: str) -> bool:
        """Whether ``token`` was issued for ``purpose``, unused and fresh; used up either
        way when it was issued (a token tried against another purpose is spent too)."""
        if not token:
            return False
        with self._lock:
            issued = self._issued.pop(token, None)
        if issued is None:
            return False
        for_what, when = issued
        return for_what == purpose and self._clock() - when <= self._lifetime


class Form(dict[str, str]):
    """A URL-encoded form's fields (the last value of a repeated one), and every value of
    a repeated one (``getlist``: the checked boxes of a list)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self._pairs = pairs

    def getlist(self, name: str) -> list[str]:
        return [v for k, v in self._pairs if k == name]


def read_form(body: bytes) -> Form:
    return Form(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))


def number(text: str | None, default: Any, low: int, high: int) -> Any:
    """``text`` as a whole number kept within [low, high]; ``default`` when missing or
    not a number."""
    try:
        return min(max(int(text), low), high) if text is not None else default
    except ValueError:
        return default
