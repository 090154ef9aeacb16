"""Conversation ingest: turn chunks with contextual indexing against the document path.

Run by hand: ``python bench/bench_conversations.py`` (a few minutes). Sessions come from
``../shared/datasets/locomo-dev/locomo-dev.json`` (LoCoMo's four development
conversations, read as transcripts; ``--conversation conv-26`` takes one). Each way of
storing them runs in a fresh memory, in one process, one after the other, with the
default model on ONNX Runtime (``--model minilm`` runs all-MiniLM-L6-v2 on torch):

* ``markdown``: a session as one Markdown document cut into 256-token chunks, as
  conversations were stored before they were chunked by turn;
* ``turns``: one chunk per turn, each embedded alone (no context in the index text);
* ``turns+context``: the default, each turn BM25-indexed with its date, speaker,
  neighbouring turns and resolved relative dates; its vector blended from its own lines'
  embedding and its neighbours' (each turn embedded once);
* ``joined``: the same index text, embedded whole for each turn (``HYBRID_RAG_TURN_VECTORS=
  joined``, the default before blending: each turn's words embedded about four times).

For each: wall and CPU time of ``ingest_loaded`` over every session (CPU: every thread
of the process), both per 1,000 turns, wall / CPU, the time spent inside the model
(``embed_documents``), the share outside it (chunking, index text, hashing, the store),
texts embedded, and turns per second. Targets: wall ≤ 1.2 × CPU, and the share outside
the model ≤ 15% with contextual indexing. The load average is printed before and after:
on a busy machine the wall times grow, the CPU times much less.
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
from memory_pipeline.embedding.st import MINILM_PACKAGE  # noqa: E402
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


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def _run(name: str, sessions: list[Conversation], settings: Settings, inner: object) -> dict:
    timed = TimedEmbedder(inner)
    with tempfile.TemporaryDirectory() as tmp:
        local = settings.replace(
            db_path=Path(tmp) / "memory.db", index_path=Path(tmp) / "index", database_url=None
        )
        system = MemorySystem(local, embedder=timed)  # type: ignore[arg-type]
        try:
            started, cpu = time.perf_counter(), _cpu()
            for conv in sessions:
                if name == "markdown":
                    doc = load_text(conv.to_markdown(), conv.source_title)
                else:
                    doc = conv.to_loaded()
                system.ingest_loaded([doc], conv.metadata(), update_index=False)
            wall, cpu = time.perf_counter() - started, _cpu() - cpu
            chunks = system.counts()["chunks"]
        finally:
            system.close()
    turns = sum(len(c.messages) for c in sessions)
    return {
        "way": name,
        "wall": wall,
        "cpu": cpu,
        "per_1k": (wall * 1000 / turns, cpu * 1000 / turns),
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
    parser.add_argument("--conversation", help="only this conversation (e.g. conv-26)")
    parser.add_argument(
        "--model", choices=("default", "minilm"), default="default",
        help="default: multilingual-e5-small on ONNX Runtime; minilm: all-MiniLM-L6-v2 on torch",
    )  # fmt: skip
    parser.add_argument(
        "--ways",
        default="markdown,turns,turns+context,joined",
        help="comma-separated ways to store",
    )
    args = parser.parse_args()
    if not args.file.exists():
        print(f"{args.file} is not here; pass --file with a LoCoMo or transcript file")
        return 2
    sessions = parse_transcript(args.file)
    if args.conversation:
        tag = f"conversation_id:{args.conversation}"
        sessions = [c for c in sessions if tag in c.metadata()["tags"]]
    sessions = sessions[: args.sessions]
    base = Settings.from_env()
    if args.model == "minilm":
        base = base.replace(model=MINILM_PACKAGE, runtime="torch")
    inner = embedder_for(base.embedding)
    inner.embed_documents(["warm up the model"])  # type: ignore[attr-defined]
    ways = args.ways.split(",")
    turns = sum(len(c.messages) for c in sessions)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(f"{len(sessions)} sessions, {turns} turns, model {inner.model_id}")
    no_context = base.replace(turn_context_before=0, turn_context_after=0, turn_dates=False)
    runs = {
        "markdown": lambda: _run("markdown", sessions, base, inner),
        "turns": lambda: _run("turns", sessions, no_context, inner),
        "turns+context": lambda: _run("turns+context", sessions, base, inner),
        "joined": lambda: _run("joined", sessions, base.replace(turn_vectors="joined"), inner),
    }
    rows = [runs[way]() for way in ways]
    print()
    print(
        "| way | wall s | CPU s | wall / CPU | wall, CPU s per 1,000 turns | in model s "
        "| outside the model | texts embedded | chunks | turns/s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['way']} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['wall'] / r['cpu']:.2f} | "
            f"{r['per_1k'][0]:.0f}, {r['per_1k'][1]:.0f} | {r['model']:.1f} | "
            f"{r['outside']:.1%} | {r['texts']} | {r['chunks']} | {r['turns_per_s']:.1f} |"
        )
    for r in rows:
        if r["way"] == "turns+context":
            print(
                f"\nturns+context: wall {r['wall'] / r['cpu']:.2f} × CPU (target ≤ 1.2); "
                f"{r['outside']:.1%} of ingest time outside the model (target ≤ 15%)"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
