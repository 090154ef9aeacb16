"""Page latency of ``memory-pipeline ui`` on a memory of about 10,000 chunks.

Run by hand: ``python bench/bench_ui.py [--memory DIR] [--model NAME] [--rounds N]``.
The memory is SciFact's corpus (``../shared/datasets/scifact``, ~11,400 chunks with the
default model) ingested once into ``DIR`` (default: a folder under the system's temp
folder, kept for the next run; with the default model that takes 8-15 minutes here).
A real ``memory-pipeline ui`` process then serves it on loopback, and each page is asked
for ``--rounds`` times over HTTP, as a browser would (the cookie the token was traded
for): the overview, the timeline, a document, and search — each round a different
SciFact question, so the query's embedding is part of every search. Then the writes,
each as the page's form posts it (the viewer's Origin, the form token of a page fetched
before, untimed): a chunk's importance saved (a different chunk each round), an agent's
change accepted (changes made beforehand, as the agent's, on other chunks), and a
document deleted with its index update (a different document each round; stored again
afterwards from its note, so the memory is the same for the next run). Printed: p50 and
p95 per page and per write in milliseconds, with the load average before and after.
The goal of the viewer's issue: p95 ≤ 150 ms on a 2-core machine.
"""

from __future__ import annotations

import argparse
import http.client
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
from html import unescape
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


def agents_changes(memory: Path, model: str, docs: list[str]) -> list[int]:
    """One change per document, made as the agent's (importance of its first chunk, as
    ``set_chunk_tags`` over MCP records it); their ids."""
    code = (
        "import json, sys; from memory_pipeline.config import Settings; "
        "from memory_pipeline.system import MemorySystem; "
        "m = MemorySystem(Settings.from_env()); "
        "[m.set_chunk_tags(d, 0, importance=0.6, actor='mcp') for d in sys.argv[1:]]; "
        "print(json.dumps([c.id for c in m.proposals(len(sys.argv))])); m.close()"
    )
    return sorted(json.loads(_python(memory, model, code, docs)))


def set_importance(memory: Path, model: str, docs: list[str], importance: float | None) -> None:
    """The first chunk of each document given ``importance`` (None: unset), as a person's."""
    code = (
        "import sys; from memory_pipeline.config import Settings; "
        "from memory_pipeline.system import MemorySystem; "
        "m = MemorySystem(Settings.from_env()); "
        f"[m.set_chunk_tags(d, 0, importance={importance!r}, actor='cli') for d in sys.argv[1:]]; "
        "m.close()"
    )
    _python(memory, model, code, docs)


def _python(memory: Path, model: str, code: str, args: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=_env(memory, model), cwd=memory, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout


def restore(memory: Path, model: str, sources: list[str]) -> None:
    """The deleted documents stored again from their notes (untimed)."""
    if not sources:
        return
    notes = [str(memory / "notes" / Path(s).name) for s in sources]
    subprocess.run(
        [sys.executable, "-m", "memory_pipeline.cli", "ingest", *notes],
        env=_env(memory, model), cwd=memory, check=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def first_ticked(page: str) -> dict[str, str]:
    """A list page's form with its first box ticked."""
    token = re.findall(r'name="form_token" value="([^"]+)"', page)[0]
    chunk = re.findall(r'name="chunk" value="(\d+)"', page)[0]
    return {"form_token": unescape(token), "chunk": chunk}


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
    # the chunks the forgetting rounds archive are cut by importance (set below, undone after)
    server = subprocess.Popen(
        [sys.executable, "-m", "memory_pipeline.cli", "ui", "--port", str(port)],
        env={**env, "HYBRID_RAG_IMPORTANCE_THRESHOLD": "0.05"}, cwd=args.memory, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
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

        def post(path: str, fields: dict[str, str]) -> float:
            """A form posted as the browser posts it; its answer read, not followed."""
            body = urllib.parse.urlencode(fields)
            headers = {
                **cookie,
                "Origin": base,
                "Content-Type": "application/x-www-form-urlencoded",
            }
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            started = time.perf_counter()
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            took = (time.perf_counter() - started) * 1000
            conn.close()
            if response.status not in (200, 303):
                raise SystemExit(f"POST {path}: {response.status}")
            return took

        def token(path: str) -> str:
            found = re.search(r'name="form_token" value="([^"]+)"', get(path)[1])
            assert found is not None, path
            return unescape(found.group(1))

        docs: list[str] = []
        while len(docs) < 2 * args.rounds + 1:
            listed = get(f"/documents?offset={len(docs)}")[1]
            more = re.findall(r'href="documents/([0-9a-f]+)"', listed)
            if not more:
                break
            docs += [d for d in dict.fromkeys(more) if d not in docs]
        assert len(docs) >= 2 * args.rounds + 1, "too few documents on the timeline"
        saving, deleting = docs[: args.rounds], docs[args.rounds : 2 * args.rounds]
        writes: dict[str, list[float]] = {
            "save a chunk's fields": [],
            "accept an agent's change": [],
            "delete a document (and update the index)": [],
        }
        for i, doc in enumerate(saving):
            fields = {"form_token": token(f"/documents/{doc}"), "was_importance": ""}
            fields.update(importance=f"{0.25 + 0.5 * (i % 2)}", knowledge_type="", tags="")
            fields.update(was_knowledge_type="", was_tags="")
            writes["save a chunk's fields"].append(post(f"/documents/{doc}/chunks/0", fields))
        changes = agents_changes(args.memory, args.model, deleting)
        for change in changes:
            fields = {"form_token": token("/proposals"), "decision": "accept"}
            writes["accept an agent's change"].append(post(f"/proposals/{change}", fields))
        sources = []
        for doc in deleting:
            page = get(f"/documents/{doc}")[1]
            source = re.search(r'<td>source</td><td><span class="any">([^<]+)</span>', page)
            assert source is not None
            sources.append(unescape(source.group(1)))
            fields = {"form_token": token(f"/documents/{doc}/delete")}
            writes["delete a document (and update the index)"].append(
                post(f"/documents/{doc}/delete", fields)
            )
        # forgetting: the page (the batch's dry run over every chunk), one ticked chunk
        # archived, then restored from the archive's page
        weak = docs[2 * args.rounds : 3 * args.rounds]
        set_importance(args.memory, args.model, weak, 0.01)
        writes["the forgetting page (its dry run)"] = []
        writes["archive a ticked chunk (and update the index)"] = []
        writes["the archive page"] = []
        writes["restore a chunk (and update the index)"] = []
        for _ in weak:
            took, page = get("/forgetting")
            writes["the forgetting page (its dry run)"].append(took)
            writes["archive a ticked chunk (and update the index)"].append(
                post("/forgetting", first_ticked(page))
            )
            took, page = get("/archive")
            writes["the archive page"].append(took)
            writes["restore a chunk (and update the index)"].append(
                post("/archive/restore", first_ticked(page))
            )
        set_importance(args.memory, args.model, weak, None)
        times.update(writes)
    finally:
        server.terminate()
        server.wait(timeout=30)
    restore(args.memory, args.model, sources)
    print(f"\nmemory: {chunks} chunks; model: {args.model or 'the default'}; {args.rounds} rounds")
    print("| page or write | p50 (ms) | p95 (ms) |\n|---|---|---|")
    for name, values in times.items():
        p95 = statistics.quantiles(values, n=20)[-1]
        print(f"| {name} | {statistics.median(values):.1f} | {p95:.1f} |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
