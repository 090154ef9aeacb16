"""Shared setup for the pipeline and sources tests (no tests here).

A real memory on a temporary SQLite file, with the fast deterministic ``hashing``
embedder, and real source roots: plain documents under ``notes/`` and ``papers/``,
the sample conversation exports under ``conversations/``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from memory_pipeline.system import doc_id_for

FIXTURES = Path(__file__).parent / "fixtures" / "conversations"
#: Every asset the definitions declare.
ASSET_KEYS = {
    "source_files",
    "documents",
    "chunks",
    "embeddings",
    "search_index",
    "forgetting_candidates",
    "scrub_report",
    "retrieval_eval",
}

NOTES = {
    "fusion.md": "---\ntitle: Fusion\ntags: [ranking]\n---\n\n# Fusion\n\nReciprocal rank "
    "fusion adds one over k plus rank across the dense and the sparse lists.",
    "decay.md": "# Decay\n\nNews knowledge decays with a half-life of weeks while principles "
    "never decay in the memory axis.",
}
PAPER = "# BM25\n\nOkapi BM25 ranks documents by term frequency and inverse document frequency."

SOURCES_YAML = """
state: state/sources-state.json
roots:
  - name: notes
    path: roots/notes
    knowledge_type: principle
    importance: 0.8
    tags: [team]
  - name: papers
    path: roots/papers
    knowledge_type: paper
  - name: claude-code
    path: roots/conversations/claude-code
    kind: claude_code
  - name: claude-ai
    path: roots/conversations/claude-ai
    kind: claude_ai
"""


@dataclass
class Corpus:
    base: Path
    sources_file: Path
    notes: Path
    papers: Path
    claude_code: Path
    claude_ai: Path

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "HYBRID_RAG_DB_PATH": str(self.base / "memory.db"),
            "HYBRID_RAG_INDEX_PATH": str(self.base / "indices"),
            "HYBRID_RAG_ARCHIVE_PATH": str(self.base / "archive"),
            "HYBRID_RAG_EMBEDDING_MODEL": "hashing",
            "HYBRID_RAG_MAX_CHUNK_SIZE": "64",
            "HYBRID_RAG_CHUNK_OVERLAP": "8",
            "MEMORY_PIPELINE_SOURCES": str(self.sources_file),
            "MEMORY_PIPELINE_GOLDEN": str(self.base / "golden.yaml"),
            "MEMORY_PIPELINE_EVAL_DIR": str(self.base / "eval"),
            **extra,
        }

    @property
    def session_file(self) -> Path:
        return next(self.claude_code.rglob("*.jsonl"))

    @property
    def export_file(self) -> Path:
        return self.claude_ai / "conversations.json"


def make_corpus(base: Path, *, conversations: bool = True) -> Corpus:
    """Source roots with two notes, one paper and (optionally) both conversation exports."""
    roots = base / "roots"
    notes, papers = roots / "notes", roots / "papers"
    cc, ai = roots / "conversations" / "claude-code", roots / "conversations" / "claude-ai"
    for folder in (notes, papers, cc, ai):
        folder.mkdir(parents=True, exist_ok=True)
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    (papers / "bm25.md").write_text(PAPER, encoding="utf-8")
    if conversations:
        shutil.copytree(FIXTURES / "claude-code-projects", cc, dirs_exist_ok=True)
        shutil.copy(FIXTURES / "claude-ai-export" / "conversations.json", ai)
        for path in [*cc.rglob("*"), ai / "conversations.json"]:
            path.chmod(0o644 if path.is_file() else 0o755)
    sources = base / "sources.yaml"
    sources.write_text(SOURCES_YAML, encoding="utf-8")
    write_golden(base / "golden.yaml", notes / "fusion.md", papers / "bm25.md")
    return Corpus(base, sources, notes, papers, cc, ai)


def write_golden(path: Path, fusion: Path, bm25: Path) -> None:
    """Two judged queries over the notes (document ids are content hashes)."""
    queries = [
        {
            "id": "rrf",
            "query": "reciprocal rank fusion",
            "relevant": [doc_id_for(fusion.read_bytes())],
        },
        {
            "id": "bm25",
            "query": "term frequency ranking",
            "relevant": [doc_id_for(bm25.read_bytes())],
        },
    ]
    path.write_text(yaml.safe_dump({"name": "test", "queries": queries}), encoding="utf-8")


@dataclass
class Webhook:
    url: str
    status: int = 200  # what the server answers
    received: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)

    def delivered(self) -> list[dict[str, Any]]:
        """The bodies the server accepted (answered 2xx)."""
        return [body for status, _, body in self.received if status < 300]
