"""The two runtimes of the default model side by side: ONNX Runtime (int8) and torch.

Run by hand: ``python bench/bench_embedding.py`` (about 10 minutes here; ``--notes``,
``--repeats`` for less). Texts come from ../shared/datasets (LoCoMo turns as short
notes, SciFact abstracts as passages, SciFact and JaQuAD questions as queries); the
model is the default multilingual-e5-small, unpacked and exported in the model cache.
Printed in one table, per runtime, against the targets:

* model load to first vector, in a fresh process (spawn to the vector, wall);
* ``embed_query`` p50 / p95 (200 questions, English and Japanese);
* ingest of short notes one at a time (``MemorySystem.ingest_text``): per-note p50 / p95;
* batch throughput on ~256-token passages (``embed_documents``);
* a cold ``memory-pipeline search``: wall and peak RSS of the process;
* the MCP server over stdio: spawn to the first ``hybrid_search`` result, and its peak RSS;
* then query, note and batch figures again with a second process embedding in a loop
  beside it (the same runtime), as when a Dagster run and the MCP server share the cores.

The machine is shared and noisy: compare the columns of one run, not runs of two days.
The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
RUNTIMES = ("onnx", "torch")
TARGETS = {
    "first vector, fresh process (s)": "≤ 1.5",
    "embed_query p50 (ms)": "≤ 10",
    "one-note ingest p50 (ms)": "≤ 30",
    "cold search wall (s)": "≤ 3",
    "cold search peak RSS (MB)": "≤ 600",
    "MCP spawn → first result (s)": "≤ 5",
}

FIRST_VECTOR = """
import time
from memory_pipeline.config import Settings
from memory_pipeline.embedding.registry import embedder_for
embedder_for(Settings.from_env().embedding).embed_query("what did the chunk size experiment show?")
print("ok")
"""
PEAK_RSS = """
import atexit, resource, runpy, sys
atexit.register(lambda: sys.stderr.write(
    "\\nPEAK_KB %d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
sys.argv = {argv!r}
runpy.run_module({module!r}, run_name="__main__")
"""
LOOP = """
from memory_pipeline.config import Settings
from memory_pipeline.embedding.onnx import OnnxEmbedder
from memory_pipeline.embedding.registry import embedder_for
e = embedder_for(Settings.from_env().embedding)
if isinstance(e, OnnxEmbedder):
    e.spinning = {spinning!r}
texts = {texts!r}
while True:
    e.embed_documents(texts)
"""


def _jsonl(path: Path, limit: int) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line))
            if len(out) >= limit:
                break
    return out


def texts(notes: int) -> tuple[list[str], list[str], list[str]]:
    """(short notes, ~256-token passages, questions)."""
    turns = []
    for c in range(4):
        corpus = DATASETS / "locomo-dev" / "beir" / f"locomo-c{c}" / "corpus.jsonl"
        turns += [d["text"] for d in _jsonl(corpus, notes)]
    passages = [
        " ".join(f"{d.get('title', '')} {d['text']}".split()[:180])  # ~256 tokens
        for d in _jsonl(DATASETS / "scifact" / "corpus.jsonl", 64)
    ]
    queries = [d["text"] for d in _jsonl(DATASETS / "scifact" / "queries.jsonl", 100)]
    queries += [d["text"] for d in _jsonl(DATASETS / "jaquad" / "queries.jsonl", 100)]
    return turns[:notes], passages, queries


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def env_for(runtime: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "HYBRID_RAG_EMBEDDING_RUNTIME": runtime, **extra}


def first_vector(runtime: str, repeats: int) -> float:
    walls = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", FIRST_VECTOR], env=env_for(runtime), check=True,
            capture_output=True, cwd=tempfile.gettempdir(),
        )  # fmt: skip
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def in_process(runtime: str, notes: list[str], passages: list[str], queries: list[str],
               folder: Path) -> dict[str, float]:  # fmt: skip
    """Query latency, one-note ingests, batch throughput, through this process's embedder."""
    from memory_pipeline.config import Settings
    from memory_pipeline.system import MemorySystem

    settings = Settings.from_env(
        {
            "HYBRID_RAG_EMBEDDING_RUNTIME": runtime,
            "HYBRID_RAG_DB_PATH": str(folder / "memory.db"),
            "HYBRID_RAG_INDEX_PATH": str(folder / "indices"),
            "HYBRID_RAG_MODEL_CACHE": os.environ.get("HYBRID_RAG_MODEL_CACHE", "")
            or str(Settings().embedding.model_cache),
        }
    )
    memory = MemorySystem(settings)
    embedder = memory.embedder
    embedder.embed_query("warm up")  # the load is measured in a fresh process, not here
    q = []
    for text in queries:
        started = time.perf_counter()
        embedder.embed_query(text)
        q.append(time.perf_counter() - started)
    ingest = []
    for i, note in enumerate(notes):
        started = time.perf_counter()
        memory.ingest_text(note, title=f"note {i}")
        ingest.append(time.perf_counter() - started)
    started = time.perf_counter()
    embedder.embed_documents(passages)
    throughput = len(passages) / (time.perf_counter() - started)
    memory.close()
    return {
        "embed_query p50 (ms)": statistics.median(q) * 1000,
        "embed_query p95 (ms)": pct(q, 0.95) * 1000,
        "one-note ingest p50 (ms)": statistics.median(ingest) * 1000,
        "one-note ingest p95 (ms)": pct(ingest, 0.95) * 1000,
        "passages/s (~256 tokens)": throughput,
    }


def cold_search(runtime: str, folder: Path, repeats: int) -> tuple[float, float]:
    code = PEAK_RSS.format(
        argv=["memory-pipeline", "search", "what did Caroline say about adoption?", "-k", "5"],
        module="memory_pipeline.cli.main",
    )
    walls, peaks = [], []
    env = env_for(
        runtime,
        HYBRID_RAG_DB_PATH=str(folder / "memory.db"),
        HYBRID_RAG_INDEX_PATH=str(folder / "indices"),
    )
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True,
            cwd=tempfile.gettempdir(), check=True,
        )  # fmt: skip
        walls.append(time.perf_counter() - started)
        peaks.append(int(done.stderr.rsplit("PEAK_KB", 1)[1].split()[0]) / 1024)
    return statistics.median(walls), max(peaks)


def mcp_first_result(runtime: str, folder: Path) -> tuple[float, float]:
    """Spawn ``python -m serving`` over stdio, time the first hybrid_search; its peak RSS."""
    import anyio
    from mcp import Client

    from serving.harness import stdio_params

    pid_file = folder / "server.pid"
    code = (
        "import os, runpy, sys\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "sys.argv = ['serving']\n"
        "runpy.run_module('serving', run_name='__main__')\n"
    )
    env = env_for(
        runtime,
        HYBRID_RAG_DB_PATH=str(folder / "memory.db"),
        HYBRID_RAG_INDEX_PATH=str(folder / "indices"),
    )
    params = stdio_params(env, Path(tempfile.gettempdir()))
    params.args = ["-c", code]
    out: dict[str, float] = {}

    async def run() -> None:
        started = time.perf_counter()
        async with Client(params) as client:
            result = await client.call_tool(
                "hybrid_search", {"query": "what did Caroline say about adoption?", "top_k": 5}
            )
            assert not result.is_error, result
            out["first"] = time.perf_counter() - started
            status = Path(f"/proc/{pid_file.read_text().strip()}/status").read_text()
            hwm = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
            out["rss"] = int(hwm.split()[1]) / 1024

    anyio.run(run)
    return out["first"], out["rss"]


def spinning_effect(passages: list[str], queries: list[str]) -> dict[str, tuple[float, float]]:
    """ONNX threads that sleep (the setting) against ONNX Runtime's default spinning, each
    beside a neighbour process that spins or sleeps the same way: query p50, passages/s."""
    from memory_pipeline.config import Settings
    from memory_pipeline.embedding.onnx import OnnxEmbedder

    cache = Settings.from_env().embedding.model_cache
    out = {}
    for spin in (False, True):
        embedder = OnnxEmbedder(cache_dir=cache, spinning=spin)
        embedder.embed_query("warm up")
        with neighbour("onnx", passages, spinning=spin):
            q = []
            for text in queries:
                started = time.perf_counter()
                embedder.embed_query(text)
                q.append(time.perf_counter() - started)
            started = time.perf_counter()
            embedder.embed_documents(passages)
            rate = len(passages) / (time.perf_counter() - started)
        out["spinning" if spin else "sleeping (default)"] = (statistics.median(q) * 1000, rate)
    return out


@contextmanager
def neighbour(runtime: str, passages: list[str], *, spinning: bool = False) -> Iterator[None]:
    """A second process embedding in a loop, on the same runtime, for the duration."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOOP.format(texts=passages[:8], spinning=spinning)],
        env=env_for(runtime), cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(20)  # its model loaded and its loop running
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=1000, help="short notes ingested one by one")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per cold figure")
    args = parser.parse_args()
    notes, passages, queries = texts(args.notes)
    print(f"load average before: {os.getloadavg()[0]:.2f}; cores: {os.cpu_count()}")
    table: dict[str, dict[str, float]] = {}
    for runtime in RUNTIMES:
        row: dict[str, float] = {}
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            row["first vector, fresh process (s)"] = first_vector(runtime, args.repeats)
            row.update(in_process(runtime, notes, passages, queries, folder))
            wall, rss = cold_search(runtime, folder, args.repeats)
            row["cold search wall (s)"], row["cold search peak RSS (MB)"] = wall, rss
            first, server_rss = mcp_first_result(runtime, folder)
            row["MCP spawn → first result (s)"], row["MCP server peak RSS (MB)"] = first, server_rss
            busy_dir = folder / "beside"
            busy_dir.mkdir()
            with neighbour(runtime, passages):
                busy = in_process(
                    runtime, notes[: max(100, len(notes) // 4)], passages, queries, busy_dir
                )
                busy_first = first_vector(runtime, 1)
            row.update({f"{k}, neighbour embedding" : v for k, v in busy.items()})  # fmt: skip
            row["first vector, fresh process (s), neighbour embedding"] = busy_first
        table[runtime] = row
        print(f"{runtime}: done (load {os.getloadavg()[0]:.2f})", flush=True)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}\n")
    print("| figure | onnx | torch | torch / onnx | target |")
    print("|---|---|---|---|---|")
    for key in table["onnx"]:
        a, b = table["onnx"][key], table["torch"][key]
        ratio = b / a if a else float("nan")
        if "passages/s" in key:
            ratio = a / b if b else float("nan")  # higher is better: onnx / torch
        print(f"| {key} | {a:.2f} | {b:.2f} | {ratio:.1f}× | {TARGETS.get(key, '')} |")
    print("\n(passages/s: the ratio column is onnx / torch; every other row is torch / onnx)")
    print("\nONNX threads beside a second ONNX process embedding in a loop:")
    print("| threads | embed_query p50 (ms) | passages/s |\n|---|---|---|")
    for name, (p50, rate) in spinning_effect(passages, queries).items():
        print(f"| {name} | {p50:.2f} | {rate:.2f} |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
