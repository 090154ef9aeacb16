"""engram-search 0.1.7 storing sessions through its Python API (its README's quickstart,
the steps of its ``/ingest`` route): ``session_to_documents`` per session (chunks of 6
turns overlapping by 1, the date and speaker names in the text, plus a synthetic
preference and topic document per session), one ``encode_documents`` and one
``FaissBackend.add``. Its CLI and server build the FAISS index at 1,024 dimensions
(bge-large) whatever the model, so MiniLM's 384 are given here as its API allows.

    python bench/peers/engram_search.py SESSIONS_JSON MODEL_FOLDER STORE_FOLDER

SESSIONS_JSON: ``{"speaker_names": {"user": …, "assistant": …}, "sessions":
[{"id", "timestamp", "turns": [{"role", "content"}]}]}``.
"""

from __future__ import annotations

import json
import sys

from _timing import report, timed


def main(sessions_file: str, model: str, store: str) -> None:
    def load():  # type: ignore[no-untyped-def]
        from engram.retrieval.embedder import Embedder

        embedder = Embedder(model)
        embedder.encode_documents(["warm up the model"])
        return embedder

    embedder, *load_times = timed(load)
    from engram.backends.base import Document
    from engram.backends.faiss_backend import FaissBackend
    from engram.ingestion.parser import session_to_documents

    with open(sessions_file, encoding="utf-8") as f:
        data = json.load(f)

    def ingest() -> int:
        backend = FaissBackend(path=store, dimension=embedder.dimension)
        parsed = []
        for s in data["sessions"]:
            parsed += session_to_documents(
                session=s["turns"],
                session_id=s["id"],
                timestamp=s["timestamp"],
                include_assistant=True,
                speaker_names=data["speaker_names"],
            )
        vectors = embedder.encode_documents([d["text"] for d in parsed])
        backend.add(
            [
                Document(id=d["id"], text=d["text"], embedding=v.tolist(), metadata=d["metadata"])
                for d, v in zip(parsed, vectors, strict=True)
            ]
        )
        return backend.count()  # type: ignore[no-any-return]

    stored, *ingest_times = timed(ingest)
    report(tuple(load_times), tuple(ingest_times), stored=stored)  # type: ignore[arg-type]


if __name__ == "__main__":
    main(*sys.argv[1:4])
