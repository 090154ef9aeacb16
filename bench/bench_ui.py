"""Page latency of ``memory-pipeline ui`` on a memory of about 10,000 chunks.

Run by hand: ``python bench/bench_ui.py [--memory DIR] [--model NAME] [--rounds N]``.
The memory is SciFact's corpus (``../shared/datasets/scifact``, ~11,400 chunks with the
default model) ingested once into ``DIR`` (default: a folder under the system's temp
folder, kept for the next run; with the default model that takes 8-15 minutes here).
A real ``memory-pipeline ui`` process then serves it on loopback, and each page is asked
for ``--rounds`` times over HTTP, as a browser would (the cookie the token was traded
for): the overview, the timeline, a document, and search — each round a different
SciFact question, so the query's embedding is part of every search. Printed: p50 and
p95 per page in milliseconds, with the load average before and after. The goal of the
viewer's issue: p95 ≤ 150 ms on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "datasets" / "scifact"
sys.path.insert(0, str(REPO))

from tests.ui.browser import free_port, memory_env  # noqa: E402


def build(memory: Path, model: str) -> int:
    """SciFact's abstracts as notes, ingested into ``memory`` (once); its chunk count."""
    marker = memory / "built.json"
    if marker.is_file():
        return int(json.loads(marker.read_text())["chunks"])
    notes = memory / "notes"
    notes.mkdir(parents=True, exist_ok=True)
    with (SCIFACT / "corpus.jsonl").open(encoding="utf-8") as corpus:
        for line in corpus:
            doc = json.loads(line)
            text = f"# {doc.get('title') or doc['_id']}\n\n{doc['text']}\n"
            (notes / f"{doc['_id']}.md").write_text(text, encoding="utf-8")
    env = _env(memory, model)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "memory_pipeline.cli", "ingest", "--recursive", str(notes)],
        env=env, cwd=memory, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    stats = subprocess.run(
        [sys.executable, "-m", "memory_pipeline.cli", "stats", "--json"],
        env=env, cwd=memory, check=True, capture_output=True, text=True,
    )  # fmt: skip
    chunks = int(json.loads(stats.stdout)["chunks"])
    marker.write_text(json.dumps({"chunks": chunks, "model": model}))
    print(f"built: {chunks} chunks in {time.perf_counter() - started:.0f} s", flush=True)
    return chunks


def _env(memory: Path, model: str) -> dict[str, str]:
    env = memory_env(memory)
    env.pop("HYBRID_RAG_EMBEDDING_MODEL", None)  # memory_env's fast embedder: not here
    if model:
        env["HYBRID_RAG_EMBEDDING_MODEL"] = model
    env["HOME"] = os.environ.get("HOME", str(memory))  # the user's model cache
    return env


def questions(n: int) -> list[str]:
    with (SCIFACT / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:n]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", type=Path, default=Path(tempfile.gettempdir()) / "bench-ui")
    parser.add_argument("--model", default="", help="embedding model (default: the default)")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; cores: {os.cpu_count()}", flush=True)
    chunks = build(args.memory, args.model)
    port = free_port()
    env = _env(args.memory, args.model)
    server = subprocess.Popen(
        [sys.executable, "-m", "memory_pipeline.cli", "ui", "--port", str(port)],
        env=env, cwd=args.memory, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        token = re.search(r"token=(\S+)", server.stdout.readline())
        assert token is not None
        base = f"http://127.0.0.1:{port}"
        cookie = {"Cookie": f"memory_pipeline_ui_{port}={token.group(1)}"}

        def get(path: str) -> tuple[float, str]:
            started = time.perf_counter()
            with urllib.request.urlopen(urllib.request.Request(base + path, headers=cookie)) as r:
                body = r.read().decode()
            return (time.perf_counter() - started) * 1000, body

        for _ in range(100):  # until it listens
            try:
                get("/")
                break
            except OSError:
                time.sleep(0.1)
        _, timeline = get("/documents")
        doc = re.search(r'href="(documents/[0-9a-f]+)"', timeline)
        assert doc is not None
        asked = questions(args.rounds + 1)
        get("/search?" + urllib.parse.urlencode({"q": asked[-1]}))  # the model loads once
        pages = {
            "overview": lambda i: "/",
            "timeline": lambda i: "/documents",
            "document": lambda i: f"/{doc.group(1)}",
            "search (a new question each time)": lambda i: (
                "/search?" + urllib.parse.urlencode({"q": asked[i]})
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in pages}
        for i in range(args.rounds):
            for name, path in pages.items():
                times[name].append(get(path(i))[0])
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"\nmemory: {chunks} chunks; model: {args.model or 'the default'}; {args.rounds} rounds")
    print("| page | p50 (ms) | p95 (ms) |\n|---|---|---|")
    for name, values in times.items():
        p95 = statistics.quantiles(values, n=20)[-1]
        print(f"| {name} | {statistics.median(values):.1f} | {p95:.1f} |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
