"""Scrub: a memory filled with redaction off (by today's code: every transcript format,
a markdown file, notes, some of them forgotten to the archive, a capture waiting in the
spool) holds the hostile corpus's secrets; ``scrub`` lists each kind and place, never a
value; ``scrub --apply`` leaves no byte of any of them in any file under the memory's
folder (the database, its WAL, the index files, the BM25 term dictionaries, the archive,
the spool), and the words around them are still found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
import sqlalchemy as sa
from mcp import Client

from memory_pipeline import spool
from memory_pipeline.config import Settings
from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.locations import capture_dir
from memory_pipeline.memory.archive import iter_archive
from memory_pipeline.spaces import Spaces
from memory_pipeline.system import MemorySystem
from serving.harness import StoreLayout, stdio_params, structured
from tests.capture.helpers import cli
from tests.hygiene.corpus import AROUND, Corpus, build
from tests.hygiene.test_no_secret_stored import IMPORTS, leaks_in_files, leaks_in_terms, needles


def run_ok(*args: str, env: dict[str, str]) -> str:
    done = cli(*args, env=env)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


def scrub_json(*args: str, env: dict[str, str]) -> dict[str, Any]:
    return json.loads(run_ok("scrub", "--json", *args, env=env))


def settings_of(layout: StoreLayout, **extra: Any) -> Settings:
    return Settings(
        db_path=layout.db,
        index_path=layout.index,
        archive_path=layout.archive,
        model_cache=layout.root / "models",
        model="hashing",
        **extra,
    )


async def notes_over_mcp(env: dict[str, str], layout: StoreLayout, texts: list[Any]) -> None:
    """Each note through a real stdio MCP client's ``ingest_text``."""
    async with Client(stdio_params(env, layout.docs)) as client:
        for text in texts:
            note = {
                **text,
                "text": f"{text['text']}\n\nNoted by the agent.",
                "title": f"{text['title']} (agent)",
            }
            result = structured(await client.call_tool("ingest_text", note))
            assert result["results"][0]["status"] == "ingested", result


def fill(layout: StoreLayout, corpus: Corpus, database_url: str = "") -> dict[str, str]:
    """The corpus in by every way, redaction off: every transcript format imported, a file
    ingested, notes over a real stdio MCP client and through the Python API (those
    forgotten to the archive, with a conversation); a capture waiting.
    On PostgreSQL with pgvector when ``database_url`` is given."""
    on_server = (
        {"HYBRID_RAG_DATABASE_URL": database_url, "HYBRID_RAG_INDEX_BACKEND": "pgvector"}
        if database_url
        else {}
    )
    env = layout.env(HYBRID_RAG_REDACT="off", **on_server)
    for kind, shape in IMPORTS:
        run_ok("import", kind, str(corpus.files[shape]), env=env)
    run_ok("ingest", str(corpus.files["markdown"]), env=env)
    texts = json.loads(corpus.files["texts"].read_text())
    anyio.run(notes_over_mcp, env, layout, texts)  # the agent's notes, as the agent stores them
    server = {"database_url": database_url, "backend": "pgvector"} if database_url else {}
    system = MemorySystem(settings_of(layout, redact="off", **server), embedder=HashingEmbedder())
    try:
        for text in texts:
            system.ingest_text(text["text"], text["title"], {"importance": 0.05})
        system.update_index()
        # a conversation with a key a tool cut short goes to the archive too
        with system.store.write() as w:
            w.execute(sa.text(
                "UPDATE chunks SET importance = 0.05 WHERE doc_id IN "
                "(SELECT doc_id FROM chunks WHERE content LIKE '%attachment id_rsa%')"
            ))  # fmt: skip
        weights = system.settings.memory_params(importance_threshold=0.5)
        report = system.run_forgetting_batch(
            memory=weights, dry_run=False, force=True, grace_days=0, max_fraction=1.0
        )
        assert 0 < report.archived < report.live_chunks, report.render()
    finally:
        system.close()
    session = corpus.files["claude_code"]
    waiting = spool.Capture(
        session.stem, str(session), "default", str(session.parent), "SessionEnd"
    )
    spool.write_pending(capture_dir(layout.db), waiting)
    return env


@pytest.fixture
def memory(tmp_path: Path) -> tuple[StoreLayout, Corpus, dict[str, str]]:
    corpus = build(tmp_path / "in")
    layout = StoreLayout(tmp_path / "memory")
    env = fill(layout, corpus)
    assert leaks_in_files(layout.root, corpus), "the test means a memory that holds secrets"
    return layout, corpus, env


def test_scrub_lists_each_kind_and_place_then_apply_leaves_no_byte(
    memory: tuple[StoreLayout, Corpus, dict[str, str]],
) -> None:
    layout, corpus, env = memory
    archived_lines = sum(1 for _ in iter_archive(layout.archive / "chunks_archive.jsonl"))
    before = scrub_json("--all-spaces", env=env)
    text = run_ok("scrub", "--all-spaces", env=env)
    for shown in (json.dumps(before), text):
        assert not [what for piece, what in needles(corpus).items() if piece.decode() in shown]
    assert before["found"] >= 40 and len(before["by_kind"]) >= 15, before["by_kind"]
    assert before["changes"]["archive lines"] > 0 and before["changes"]["chunks"] > 0
    archived = [p for p in before["places"] if p["place"].startswith("archive line")]
    assert any(p["kind"] == "private-key" for p in archived)
    assert "take them out with: memory-pipeline scrub --apply --all-spaces" in text

    applied = scrub_json("--apply", "--all-spaces", env=env)
    assert applied["applied"] and applied["found"] == before["found"]
    assert leaks_in_files(layout.root, corpus) == []
    assert leaks_in_terms(layout.index, corpus) == []
    again = scrub_json("--all-spaces", env=env)
    assert again["found"] == 0 and again["places"] == []

    # nothing lost: every chunk, every archive line, the waiting capture; the words found
    assert sum(1 for _ in iter_archive(layout.archive / "chunks_archive.jsonl")) == archived_lines
    assert [p.suffix for p in capture_dir(layout.db).glob("*.capture")] == [".capture"]
    system = MemorySystem(settings_of(layout), embedder=HashingEmbedder())
    try:
        request = system.settings.search_request(top_k=5, record_access=False)
        hits = system.query(f"{AROUND} rollout config vault", request).hits
        assert any(AROUND in hit.content for hit in hits)
        assert system.index_health().healthy
    finally:
        system.close()


def test_a_conversation_is_indexed_again_as_ingesting_indexed_it(tmp_path: Path) -> None:
    """The turns' index texts and blended vectors ``scrub`` makes from the stored turns are
    those ingesting made (a conversation with no secret, a turn long enough to be cut):
    the texts equal, the vectors to float32 rounding."""
    from memory_pipeline.memory.scrub import ChunkPlan, _fixes, _turns_again

    corpus = build(tmp_path / "in")
    layout = StoreLayout(tmp_path / "memory")
    env = layout.env(HYBRID_RAG_MAX_CHUNK_SIZE="64", HYBRID_RAG_CHUNK_OVERLAP="8")
    run_ok("import", "claude_code", str(corpus.files["claude_code"]), env=env)
    long_turn = " ".join(f"word{n} of a long account of the rollout" for n in range(60))
    session = {
        "conversation_id": "long",
        "title": "A long turn",
        "sessions": [
            {
                "session_id": "1",
                "date": "2025-06-01T10:00:00Z",
                "turns": [
                    {"speaker": "Ana", "text": "How did the rollout go?"},
                    {"speaker": "Ben", "text": long_turn},
                    {"speaker": "Ana", "text": "Thanks, that is clear."},
                ],
            }
        ],
    }
    transcript = tmp_path / "long.json"
    transcript.write_text(json.dumps(session))
    run_ok("import", "transcript", str(transcript), env=env)
    small = settings_of(layout, max_chunk_size=64, chunk_overlap=8)
    system = MemorySystem(small, embedder=HashingEmbedder())
    try:
        chunks = list(system.store.stored_chunks())
        docs: dict[str, list[Any]] = {}
        for chunk in chunks:
            docs.setdefault(chunk.doc_id, []).append(chunk)
        engine = sa.create_engine(f"sqlite:///{layout.db}")
        with engine.connect() as c:
            stored = dict(c.execute(sa.text("SELECT chunk_id, vector FROM embeddings")).all())
        engine.dispose()
        indexing = system.settings.ingest.turn_indexing()
        assert indexing.blend is not None
        checked = 0
        for doc_chunks in docs.values():
            doc_chunks.sort(key=lambda c: c.chunk_index)
            assert all(c.turns for c in doc_chunks)
            contents = [c.content for c in doc_chunks]
            texts, embeds = _turns_again(doc_chunks, contents, indexing)
            assert texts == [c.index_text for c in doc_chunks]
            plans = [
                ChunkPlan(c.id, c.content, t, (), e)
                for c, t, e in zip(doc_chunks, texts, embeds, strict=True)
            ]
            for fix in _fixes(system.embedder, plans):
                made = np.frombuffer(fix.vector, dtype=np.float32)
                kept = np.frombuffer(stored[fix.id], dtype=np.float32)
                # the same sums, perhaps in another order: equal to float32 rounding
                assert np.allclose(made, kept, rtol=0, atol=1e-6), fix.id
                checked += 1
        turn_ids = [json.loads(c.turns)[0]["turn_id"] for c in chunks]
        assert len(turn_ids) > len(set(turn_ids)), "the test means a turn cut into parts"
        assert checked == len(chunks) > 10
    finally:
        system.close()


def test_a_memory_bound_to_one_space_scrubs_that_space_only(tmp_path: Path) -> None:
    corpus = build(tmp_path / "in")
    layout = StoreLayout(tmp_path / "memory")
    env = layout.env(HYBRID_RAG_REDACT="off")
    run_ok("ingest", str(corpus.files["markdown"]), "--space", "ours", env=env)
    run_ok("ingest", str(corpus.files["markdown"]), "--space", "theirs", env=env)
    ours = scrub_json("--space", "ours", env=env)
    assert ours["found"] > 0 and ours["spaces"] == "space 'ours'"
    assert all(p["place"].startswith("space ours,") for p in ours["places"])
    theirs_before = scrub_json("--space", "theirs", env=env)
    scrub_json("--apply", "--space", "ours", env=env)
    assert scrub_json("--space", "ours", env=env)["found"] == 0
    assert scrub_json("--space", "theirs", env=env) == theirs_before


@pytest.mark.postgres
@pytest.mark.slow
def test_scrub_on_postgresql_leaves_no_byte_in_its_rows_or_table_files(
    tmp_path: Path, pgvector_url: str
) -> None:
    """Every row of every table read as text, then the database's own files (its folder
    under ``base/``: tables, TOAST, indexes; not ``pg_wal``, which is beyond a scrub)."""
    from tests.hygiene.test_no_secret_stored import _stored_rows

    corpus = build(tmp_path / "in")
    layout = StoreLayout(tmp_path / "memory")
    env = fill(layout, corpus, pgvector_url)
    wanted = {n.decode(): what for n, what in needles(corpus).items()}

    def leaks_in_rows() -> list[str]:
        return [
            f"{t}: {w}"
            for t, row in _stored_rows(pgvector_url)
            for n, w in wanted.items()
            if n in row
        ]

    def leaks_in_table_files() -> list[str]:
        engine = sa.create_engine(pgvector_url)
        try:
            with engine.connect() as c:
                home = Path(c.execute(sa.text("SHOW data_directory")).scalar_one())
                oid = c.execute(
                    sa.text("SELECT oid FROM pg_database WHERE datname = current_database()")
                ).scalar_one()
                c.execute(sa.text("CHECKPOINT"))  # what is in shared buffers reaches the files
        finally:
            engine.dispose()
        return leaks_in_files(home / "base" / str(oid), corpus)

    assert leaks_in_rows() and leaks_in_table_files(), "the test means a memory with secrets"
    # as autovacuum may have: column statistics sampled from the texts (pg_statistic)
    engine = sa.create_engine(pgvector_url)
    try:
        with engine.connect() as c:
            c.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
    finally:
        engine.dispose()
    before = scrub_json("--all-spaces", env=env)
    assert before["found"] >= 40 and len(before["by_kind"]) >= 15
    applied = scrub_json("--apply", "--all-spaces", env=env)
    assert any(line.startswith("PostgreSQL: VACUUM FULL") for line in applied["purged"])
    assert leaks_in_rows() == []
    assert leaks_in_table_files() == []
    assert leaks_in_files(layout.root, corpus) == []  # the archive, the spool
    assert scrub_json("--all-spaces", env=env)["found"] == 0
    server = {"database_url": pgvector_url, "backend": "pgvector"}
    system = MemorySystem(settings_of(layout, **server), embedder=HashingEmbedder())
    try:
        request = system.settings.search_request(top_k=5, record_access=False)
        hits = system.query(f"{AROUND} rollout config vault", request).hits
        assert any(AROUND in hit.content for hit in hits)
    finally:
        system.close()


def test_a_search_during_a_scrub_reads_a_chunk_whole_and_never_a_scrubbed_secret(
    memory: tuple[StoreLayout, Corpus, dict[str, str]],
) -> None:
    """Searches run while ``scrub --apply`` works: each hit's text is the chunk as it was or
    as it is after, never a mix; once its transaction has committed (it says ``index`` next),
    no hit holds a piece of a secret."""
    import subprocess
    import threading

    from tests.capture.helpers import command

    layout, corpus, env = memory
    system = MemorySystem(settings_of(layout), embedder=HashingEmbedder())
    pieces = [p.decode() for p in needles(corpus)]
    try:
        before = {c.id: c.content for c in system.store.stored_chunks()}
        request = system.settings.search_request(top_k=10, record_access=False)
        process = subprocess.Popen(
            command("scrub", "--apply", "--all-spaces"),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        committed = threading.Event()

        def watch() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                if line.startswith("scrub: index"):
                    committed.set()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        seen: list[tuple[bool, int, str]] = []
        queries = [f"{AROUND} token key", "export TOKEN password", "private key attachment"]
        while process.poll() is None:
            after_commit = committed.is_set()
            for query in queries:
                seen += [
                    (after_commit, h.chunk_id, h.content) for h in system.query(query, request).hits
                ]
        process.wait(timeout=60)
        watcher.join(timeout=10)
        assert process.returncode == 0 and committed.is_set()
        now = {c.id: c.content for c in system.store.stored_chunks()}
        assert len(seen) > 20 and any(not after for after, _, _ in seen)
        for after_commit, chunk_id, content in seen:
            assert content in (before[chunk_id], now[chunk_id]), chunk_id  # whole, old or new
            if after_commit:
                assert not [p for p in pieces if p in content], chunk_id
    finally:
        system.close()
    assert leaks_in_files(layout.root, corpus) == []  # the readers did not keep the old pages


def test_the_archive_is_rewritten_under_the_lock_its_appends_take(
    memory: tuple[StoreLayout, Corpus, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forgetting run appending while a scrub rewrites the archive would lose its lines
    if the rewrite read the file, the run appended, then the rewrite renamed its copy in:
    both take the archive's lock, held by the rewrite from its read to its rename."""
    import fcntl
    import os

    from memory_pipeline.memory import scrub as scrub_module

    layout, _corpus, _env = memory
    archive = layout.archive / "chunks_archive.jsonl"
    renamed: list[bool] = []
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == archive:
            with open(archive.with_name(archive.name + ".lock"), "ab") as fh:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    renamed.append(True)  # held: an append waits for the rename
                else:
                    fcntl.flock(fh, fcntl.LOCK_UN)
                    renamed.append(False)
        real_replace(src, dst)

    monkeypatch.setattr(scrub_module.os, "replace", replace)
    system = MemorySystem(settings_of(layout), embedder=HashingEmbedder()).bound(
        Spaces.everything()
    )
    try:
        assert system.scrub(apply=True).plan.archive
    finally:
        system.close()
    assert renamed == [True]


def test_a_secret_tag_is_scrubbed_from_the_chunk_and_from_its_history(tmp_path: Path) -> None:
    """A tag an agent set that holds a token: it is dropped from the chunk, and the history
    that recorded the change keeps the change with a marker in its place."""
    import random
    import string

    token = "ghp_" + "".join(random.Random(5).choices(string.ascii_letters + string.digits, k=36))
    layout = StoreLayout(tmp_path / "memory")
    system = MemorySystem(settings_of(layout), embedder=HashingEmbedder())
    try:
        doc = system.ingest_text("The harbour service deploys on Tuesdays.", "deploys").doc_id
        system.set_chunk_tags(doc, 0, tags=["deploy", token], actor="mcp")
        plan = system.scrub().plan
        assert {f.place.split(": ")[-1] for f in plan.findings} == {"tag 2", "after"}
        system.scrub(apply=True)
        [change] = system.history()
        assert change.after == ["deploy", "[secret: github-token]"] and change.actor == "mcp"
        assert system.store.get_chunks([1])[1].tags == ("deploy",)
        assert not system.scrub().plan
    finally:
        system.close()
    files = [p for p in layout.root.rglob("*") if p.is_file()]
    assert [p.name for p in files if token[4:16].encode() in p.read_bytes()] == []
