"""The source of truth: documents, chunks, tags, vectors, index versions.

The names below load on first use, so a module that needs only a light part of the
package (``failures``, ``urls``) does not import the database toolkit with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_pipeline.store.store import Store, content_sha, now_utc

__all__ = ["Store", "content_sha", "now_utc"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from memory_pipeline.store import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
