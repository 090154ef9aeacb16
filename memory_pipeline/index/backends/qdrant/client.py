"""The Qdrant client: a server's, or local mode's (one per folder, shared in a process)."""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import Any

from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from memory_pipeline.errors import IndexUnavailableError

# Local mode locks its folder: every memory of this process on one folder shares a
# client, which the last of them to close releases (folder -> [client, memories open]).
_LOCAL: dict[str, list[Any]] = {}


@atexit.register
def _close_local() -> None:
    """Release local mode's folders before the interpreter tears its modules down."""
    for client, _ in list(_LOCAL.values()):
        client.close()
    _LOCAL.clear()


def release(client: QdrantClient) -> None:
    """One memory is done with ``client``: a server's closes, local mode's once unused."""
    for key, held in list(_LOCAL.items()):
        if held[0] is client:
            held[1] -= 1
            if held[1] <= 0:
                del _LOCAL[key]
                client.close()
            return
    client.close()


def connect(url: str | None, api_key: str | None, path: Path | None) -> QdrantClient:
    """A client of the server at ``url``, or else of local mode in ``path``."""
    if url is None:
        assert path is not None, "local mode needs a folder"
        key = str(path.resolve())
        held = _LOCAL.get(key)
        if held is not None:
            held[1] += 1
            return held[0]
        path.mkdir(parents=True, exist_ok=True)
        try:
            client = QdrantClient(path=key)
        except RuntimeError as exc:
            raise IndexUnavailableError(
                f"{exc} Set HYBRID_RAG_QDRANT_URL to a Qdrant server to share the index "
                "between processes"
            ) from exc
        _LOCAL[key] = [client, 1]
        return client
    client = QdrantClient(url=url, api_key=api_key, timeout=10, check_compatibility=False)
    try:
        client.get_collections()
    except (ResponseHandlingException, UnexpectedResponse, OSError) as exc:
        raise IndexUnavailableError(
            f"the Qdrant server at {url} did not answer ({exc}); start it, check "
            "HYBRID_RAG_QDRANT_URL and HYBRID_RAG_QDRANT_API_KEY, or use "
            "HYBRID_RAG_INDEX_BACKEND=local"
        ) from exc
    return client
