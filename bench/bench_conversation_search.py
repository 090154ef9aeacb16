"""Hybrid search latency on a 10k-turn conversation memory.

Run by hand: ``python bench/bench_conversation_search.py`` (a few minutes), or beside
another version of the code in one run::

    python -m bench.alternate --base <rev> --script bench/bench_conversation_search.py

LoCoMo's four development conversations (``../shared/datasets/locomo-dev``, 2,080
turns) are stored ``--copies`` times (default 5: 10,400 turns), each copy under its own
conversation and session ids, one document per session as an import stores them. Chunk
and query vectors are deterministic random vectors (``bench_core.RandomEmbedder``), so
the figures are the search's own work (BM25, the dense index, fusion and every later
stage) without the query's forward pass, which is the same for every version (about
5 ms on the default model). Every LoCoMo question is asked once as warm-up and then
timed (wall, and the process's CPU time, which a busy machine moves much less), as of
its conversation's last session date, without recording access:

* over the whole memory (as an agent's search);
* filtered to its own conversation (``--pooled`` in the evaluation).

p50 and p95 in milliseconds, and the load average before and after.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_core import RandomEmbedder  # noqa: E402

from memory_pipeline.config import Settings  # noqa: E402
from memory_pipeline.evaluation.locomo import conversation_tag, load_locomo  # noqa: E402
from memory_pipeline.system import MemorySystem  # noqa: E402
from memory_pipeline.types import SearchFilters  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "datasets" / "locomo-dev" / "locomo-dev.json"


def _last_day(sessions: list) -> dt.datetime | None:
    """The conversation's last session date, the evaluation's reference date (written out
    here so that versions of the code from before it had one run this too)."""
    days = [w.date() for c in sessions if (w := c.last_activity or c.started_at) is not None]
    return dt.datetime.combine(max(days), dt.time(), dt.UTC) if days else None


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=LOCOMO, help="a LoCoMo JSON file")
    parser.add_argument("--copies", type=int, default=5, help="times each conversation is stored")
    args = parser.parse_args()
    if not args.file.exists():
        print(f"{args.file} is not here; pass --file with a LoCoMo JSON file")
        return 2
    ds = load_locomo(args.file)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env().replace(
            db_path=Path(tmp) / "memory.db", index_path=Path(tmp) / "index", database_url=None
        )
        system = MemorySystem(settings, embedder=RandomEmbedder())  # type: ignore[arg-type]
        try:
            turns = 0
            for copy in range(args.copies):
                for cid, sessions in ds.sessions.items():
                    for conv in sessions:
                        if copy:
                            conv = dataclasses.replace(
                                conv,
                                session_id=f"{conv.session_id}~{copy}",
                                conversation_id=f"{cid}~{copy}",
                            )
                        system.ingest_loaded(
                            [conv.to_loaded()], conv.metadata(), update_index=False
                        )
                        turns += len(conv.messages)
            system.update_index()
            print(f"{turns} turns stored, {system.counts()['chunks']} chunks")
            asked = [
                (q.text, cid, _last_day(ds.sessions[cid]))
                for cid, qs in ds.queries.items()
                for q in qs
            ]
            times: dict[str, list[float]] = {"whole memory": [], "its conversation": []}
            cpu: dict[str, list[float]] = {"whole memory": [], "its conversation": []}
            for timed in (False, True):
                for text, cid, now in asked:
                    request = settings.search_request(now=now, record_access=False)
                    for where, filters in (
                        ("whole memory", None),
                        ("its conversation", SearchFilters(tags=(conversation_tag(cid),))),
                    ):
                        started, used = time.perf_counter(), time.process_time()
                        system.query(text, request, filters=filters)
                        if timed:
                            times[where].append(time.perf_counter() - started)
                            cpu[where].append(time.process_time() - used)
        finally:
            system.close()
    print(f"{len(asked)} questions")
    for where, values in times.items():
        print(
            f"hybrid search, {where}: p50 {_p(values, 0.5):.2f} ms, p95 {_p(values, 0.95):.2f} ms, "
            f"mean {statistics.fmean(values) * 1000:.2f} ms; CPU p50 {_p(cpu[where], 0.5):.2f} ms"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
