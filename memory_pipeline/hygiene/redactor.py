"""The one redaction step every text passes before the memory keeps it (docs/hygiene.md).

``Redactor.redact`` drops ``<private>`` and ``<memory-recall>`` spans first (a secret inside
one goes with it, and is not counted as a secret), then replaces each secret by its marker.
The counts say what was taken, by kind; the dropped spans count as ``private`` and
``memory-recall``. A text is one message unless the caller says it is a document
(``document=True``): then an opening tag never closed drops nothing and comes back in
``unclosed``, for the caller to warn about (hygiene/private.py).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from memory_pipeline.hygiene.private import Unclosed, drop_spans
from memory_pipeline.hygiene.secrets import redact_secrets

REDACT_OFF = "off"


@dataclass(frozen=True, slots=True)
class Redacted:
    text: str
    counts: Counter[str] = field(default_factory=Counter)
    # a document's opening tags never closed, kept as text (lines of the text as given)
    unclosed: tuple[Unclosed, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.counts)


@dataclass(frozen=True, slots=True)
class Redactor:
    """``enabled=False`` keeps text as given (HYBRID_RAG_REDACT=off); ``allow`` holds values
    that are not secrets though they look like one (HYBRID_RAG_REDACT_ALLOW)."""

    enabled: bool = True
    allow: frozenset[str] = frozenset()

    @classmethod
    def from_setting(cls, mode: str, allow: str = "") -> Redactor:
        values = frozenset(v.strip() for v in allow.split(",") if v.strip())
        return cls(enabled=mode.strip().lower() != REDACT_OFF, allow=values)

    def redact(self, text: str, *, document: bool = False) -> Redacted:
        """``text`` with its private spans and secrets taken out. ``document``: a file, a
        note, a sync — anything that is not one message — is kept whole after an opening
        tag it never closes; a message (the default: a turn, a query, a title) loses the
        rest of itself."""
        if not self.enabled or not text:
            return Redacted(text)
        kept, dropped, unclosed = drop_spans(text, document=document)
        kept, counts = redact_secrets(kept, self.allow)
        return Redacted(kept, counts + dropped, unclosed)
