"""Conversation ingest: turn chunks with contextual indexing against the document path.

Run by hand: ``python bench/bench_conversations.py`` (a few minutes). Sessions come from
``../shared/datasets/locomo-dev/locomo-dev.json`` (LoCoMo's four development
conversations, read as transcripts). Each way of storing them runs in a fresh memory
with the default model, in one process, one after the other:

* ``markdown``: a session as one Markdown document cut into 256-token chunks, as
  conversations were stored before they were chunked by turn;
* ``turns``: one chunk per turn, each embedded alone (no context in the index text);
* ``turns+context``: the default, each turn embedded and BM25-indexed with its date,
  speaker, neighbouring turns and resolved relative dates.

For each: wall time of ``ingest_loaded`` over every session, the time spent inside the
model (``embed_documents``), the share outside it (chunking, index text, hashing, the
store), texts embedded, and turns per second. Target: the share outside the model stays
≤ 15% with contextual indexing. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_pipeline.config import Settings  # noqa: E402
from memory_pipeline.embedding.registry import embedder_for  # noqa: E402
from memory_pipeline.ingest.loaders import load_text  # noqa: E402
from memory_pipeline.sources.conversations import Conversation  # noqa: E402
from memory_pipeline.sources.transcripts import parse_transcript  # noqa: E402
from memory_pipeline.system import MemorySystem  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo-dev" / "locomo-dev.json"


class TimedEmbedder:
    """The real embedder, with the seconds spent in ``embed_documents`` added up."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def embed_documents(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        started = time.perf_counter()
        try:
            return self.inner.embed_documents(texts, progress=progress)  # type: ignore[attr-defined, no-any-return]
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)


def _run(name: str, sessions: list[Conversation], settings: Settings, inner: object) -> dict:
    timed = TimedEmbedder(inner)
    with tempfile.TemporaryDirectory() as tmp:
        local = settings.replace(
            db_path=Path(tmp) / "memory.db", index_path=Path(tmp) / "index", database_url=None
        )
        system = MemorySystem(local, embedder=timed)  # type: ignore[arg-type]
        try:
            started = time.perf_counter()
            for conv in sessions:
                if name == "markdown":
                    doc = load_text(conv.to_markdown(), conv.source_title)
                else:
                    doc = conv.to_loaded()
                system.ingest_loaded([doc], conv.metadata(), update_index=False)
            wall = time.perf_counter() - started
            chunks = system.counts()["chunks"]
        finally:
            system.close()
    turns = sum(len(c.messages) for c in sessions)
    return {
        "way": name,
        "wall": wall,
        "model": timed.seconds,
        "outside": (wall - timed.seconds) / wall,
        "texts": timed.texts,
        "chunks": chunks,
        "turns_per_s": turns / wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=LOCOMO, help="LoCoMo or transcript file")
    parser.add_argument("--sessions", type=int, help="only the first N sessions")
    args = parser.parse_args()
    if not args.file.exists():
        print(f"{args.file} is not here; pass --file with a LoCoMo or transcript file")
        return 2
    sessions = parse_transcript(args.file)[: args.sessions]
    base = Settings.from_env()
    inner = embedder_for(base.embedding)
    inner.embed_documents(["warm up the model"])  # type: ignore[attr-defined]
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{len(sessions)} sessions, {sum(len(c.messages) for c in sessions)} turns, "
          f"model {inner.model_id}")  # fmt: skip
    no_context = base.replace(turn_context_before=0, turn_context_after=0, turn_dates=False)
    rows = [
        _run("markdown", sessions, base, inner),
        _run("turns", sessions, no_context, inner),
        _run("turns+context", sessions, base, inner),
    ]
    print()
    print("| way | wall s | in model s | outside the model | texts embedded | chunks | turns/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['way']} | {r['wall']:.1f} | {r['model']:.1f} | {r['outside']:.1%} | "
            f"{r['texts']} | {r['chunks']} | {r['turns_per_s']:.0f} |"
        )
    target = rows[-1]["outside"]
    print(f"\nturns+context: {target:.1%} of ingest time outside the model (target ≤ 15%)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
