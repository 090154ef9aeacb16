"""Tools that change the memory or its index: thin adapters over ``MemorySystem``.

Each public method is one MCP tool, its kind (write or destructive) declared with
``@tool`` beside it. Every argument is checked before the library is called, and
the library checks every file and the metadata before it writes, so a refused call
changes nothing.
Writes to the store take turns (``WriteLock``); index updates have their own
cross-process lock in the library.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, StrictBool

from memory_pipeline.errors import MemoryPipelineError
from memory_pipeline.metadata import MAX_TAGS, MAX_TITLE_CHARS, KnowledgeType
from memory_pipeline.system import MemorySystem
from memory_pipeline.types import IngestResult
from serving.errors import WriteLock
from serving.hints import to_mcp
from serving.paths import resolve_all
from serving.schemas import (
    MAX_FILES,
    MAX_TEXT_CHARS,
    ChunkOut,
    DeleteOutput,
    DocId,
    ForgettingReportOut,
    IndexUpdateOut,
    IngestOutput,
    IngestResultOut,
    MetadataIn,
    RestoreReportOut,
    Tag,
    Weight,
)
from serving.toolspec import tool

# Switches that change what is written take only JSON booleans: pydantic's lax mode would
# read "no" or 0 as False, and dry_run="no" would then run a real forgetting run.
_UPDATE_INDEX = (
    "update the index afterwards (incremental, not a full rebuild); pass false when "
    "ingesting many batches and call update_index once at the end"
)
_TEXT_UPDATE_INDEX = "also update the index now (not needed to find the text)"


class WriteTools:
    def __init__(
        self,
        system: MemorySystem,
        roots: Sequence[Path],
        cwd: Path,
        lock: WriteLock,
        *,
        allow_hard_links: bool = False,
    ) -> None:
        self.system = system
        self.roots = tuple(roots)
        self.cwd = cwd
        self.lock = lock
        self.allow_hard_links = allow_hard_links

    # ------------------------------------------------------------------ ingest
    @tool("Ingest files", "write", idempotent=True)
    def ingest(
        self,
        file_paths: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=4096)]],
            Field(min_length=1, max_length=MAX_FILES, description="files under the allowed roots"),
        ],
        metadata: MetadataIn | None = None,
        rebuild_index: Annotated[StrictBool, Field(description=_UPDATE_INDEX)] = True,
    ) -> IngestOutput:
        """Store files (.md, .markdown, .txt, .pdf, .html, .htm) in the long-term memory.

        Paths are relative to the server's working directory and must lie under
        its allowed roots. All files are checked first; if one is refused, none
        is stored. Identical content is stored once ("unchanged"); a changed
        file replaces its previous version ("replaced"). Markdown front matter
        (knowledge_type, importance, tags, source_date, title) is read; explicit
        metadata wins, except tags, which are added to the file's own.
        """
        paths = resolve_all(
            file_paths, self.roots, self.cwd, allow_hard_links=self.allow_hard_links
        )
        with self.lock.held():
            results = self.system.ingest(paths, _metadata(metadata), update_index=False)
        return self._ingested(results, rebuild_index)

    @tool("Ingest text", "write", idempotent=True, core=True)
    def ingest_text(
        self,
        text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)],
        title: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_TITLE_CHARS,
                description="names the document; new text under a stored title replaces it",
            ),
        ],
        metadata: MetadataIn | None = None,
        rebuild_index: Annotated[StrictBool, Field(description=_TEXT_UPDATE_INDEX)] = False,
    ) -> IngestOutput:
        """Store text in hand (a session summary, a decision, a note); searchable at once.

        The same text again is "unchanged"; new text under the same title replaces the old
        ("replaced").
        """
        with self.lock.held():
            result = self.system.ingest_text(text, title, _metadata(metadata))
        return self._ingested([result], rebuild_index)

    def _ingested(self, results: list[IngestResult], update: bool) -> IngestOutput:
        changed = any(r.status != "unchanged" for r in results)
        # Also when nothing changed but an earlier index update was lost (killed, failed).
        due = update and (changed or self.system.index_due())
        index, error = self._update_index() if due else (None, None)
        return IngestOutput(
            results=[_result_out(r) for r in results],
            index=index,
            index_error=error,
        )

    # ------------------------------------------------------------------ chunks
    @tool("Set a chunk's memory fields", "write", idempotent=True)
    def set_chunk_tags(
        self,
        doc_id: DocId,
        chunk_index: Annotated[int, Field(ge=0)],
        importance: Annotated[Weight | None, Field(description="0..1; omit to keep")] = None,
        knowledge_type: Annotated[KnowledgeType | None, Field(description="omit to keep")] = None,
        tags: Annotated[
            list[Tag] | None,
            Field(max_length=MAX_TAGS, description="REPLACES the chunk's tags; omit to keep"),
        ] = None,
        clear: Annotated[
            tuple[Literal["importance", "knowledge_type"], ...],
            Field(max_length=2, description="fields to unset"),
        ] = (),
    ) -> ChunkOut:
        """Change one chunk's importance, knowledge_type or tags (takes effect on the next search).

        Only the fields given change. Importance and knowledge_type steer what the
        memory keeps and forgets: change them only when a person asked for it.
        """
        changes: dict[str, Any] = {}
        if importance is not None:
            changes["importance"] = importance
        if knowledge_type is not None:
            changes["knowledge_type"] = knowledge_type.value
        for name in clear:
            if name in changes:
                raise ToolError(f"{name}: given a value and listed in clear; pass one or the other")
            changes[name] = None
        if tags is not None:
            changes["tags"] = tags
        if not changes:
            raise ToolError("nothing to change: pass importance, knowledge_type, tags or clear")
        with self.lock.held():
            record = self.system.set_chunk_tags(doc_id, chunk_index, **changes, actor="mcp")
        return ChunkOut.model_validate(record, from_attributes=True)

    @tool("Delete a document", "destructive", idempotent=True, core=True)
    def delete_document(
        self,
        doc_id: DocId,
        rebuild_index: Annotated[
            StrictBool,
            Field(description="drop its chunks from the index now (else on the next update)"),
        ] = True,
    ) -> DeleteOutput:
        """Delete a document: its chunks, tags and vectors. Final (not archived); gone from
        search at once."""
        with self.lock.held():
            removed = self.system.delete_document(doc_id, actor="mcp")
        index, error = self._update_index() if rebuild_index else (None, None)
        return DeleteOutput(doc_id=doc_id, chunks_removed=removed, index=index, index_error=error)

    # ------------------------------------------------------------------- index
    @tool("Update the index", "write", idempotent=True)
    def update_index(self) -> IndexUpdateOut:
        """Take the chunks added and deleted since the last publish into the index.

        Cheap (follows the size of the change). Publishes a new index version that
        every reader picks up on its next call.
        """
        return IndexUpdateOut.model_validate(self.system.update_index(), from_attributes=True)

    @tool("Rebuild the index", "write", idempotent=True)
    def rebuild_index(self) -> IndexUpdateOut:
        """Build a fresh index from every stored vector (never re-embeds); for repairs.

        Use when index_health reports errors; otherwise update_index is enough.
        """
        return IndexUpdateOut.model_validate(self.system.rebuild_index(), from_attributes=True)

    def _update_index(self) -> tuple[IndexUpdateOut | None, str | None]:
        """After a stored write, an index failure is reported, not raised: the write stands."""
        try:
            return self.update_index(), None
        except (MemoryPipelineError, OSError) as exc:
            return None, (
                f"{to_mcp(str(exc))} (the change is stored and searchable; call update_index later)"
            )

    # -------------------------------------------------------------- forgetting
    @tool("Forget weak chunks", "destructive")
    def run_forgetting_batch(
        self,
        time_weight: Annotated[Weight | None, Field(description="default: server setting")] = None,
        freq_weight: Annotated[Weight | None, Field(description="default: server setting")] = None,
        importance_threshold: Annotated[
            Weight | None, Field(description="chunks below this importance are candidates")
        ] = None,
        score_threshold: Annotated[
            Weight | None,
            Field(
                description="chunks whose memory value is below this are candidates once "
                "their grace period after ingest or last access is over (default: server setting)"
            ),
        ] = None,
        dry_run: Annotated[
            StrictBool, Field(description="true: only report; false: archive the candidates")
        ] = True,
        max_fraction: Annotated[
            Weight | None,
            Field(
                description="refuse a real run that would archive more than this share "
                "(default: server setting)"
            ),
        ] = None,
    ) -> ForgettingReportOut:
        """Find (dry run, the default) or archive the chunks the memory should forget.

        Always dry-run first and show the report to a person; run with
        dry_run=false only after they confirm. Archived chunks leave search but can
        be brought back with restore_archived(run_id=...).
        """
        # A dry run only reads: it need not wait for other writes. Deliberately no `force`
        # over MCP: going over max_fraction is a person's call (the refusal says so).
        gate = nullcontext() if dry_run else self.lock.held()
        with gate:
            memory = self.system.settings.memory_params(
                time_weight=time_weight,
                freq_weight=freq_weight,
                importance_threshold=importance_threshold,
            )
            report = self.system.run_forgetting_batch(
                memory=memory,
                score_threshold=score_threshold,
                dry_run=dry_run,
                max_fraction=max_fraction,
            )
        return ForgettingReportOut.model_validate(report.to_dict())

    @tool("Restore forgotten chunks", "write", idempotent=True)
    def restore_archived(
        self,
        run_id: Annotated[
            str | None, Field(min_length=1, max_length=200, description="a forgetting run's id")
        ] = None,
        doc_id: DocId | None = None,
        chunk_ids: Annotated[
            list[int] | None, Field(min_length=1, max_length=10_000, description="archived ids")
        ] = None,
    ) -> RestoreReportOut:
        """Bring archived (forgotten) chunks back into the memory and the index.

        Pass exactly one of run_id, doc_id or chunk_ids. Restored chunks get new ids
        (new_ids maps old to new).
        """
        with self.lock.held():
            report = self.system.restore_archived(run_id=run_id, doc_id=doc_id, chunk_ids=chunk_ids)
        return RestoreReportOut.model_validate(report.to_dict())


def _result_out(result: IngestResult) -> IngestResultOut:
    """A result as the tool returns it: its warnings (a tag the document never closes)
    are lines of its message, which an agent reads anyway."""
    out = IngestResultOut.model_validate(result, from_attributes=True)
    if not result.warnings:
        return out
    message = "\n".join(filter(None, [result.message, *result.warnings]))
    return out.model_copy(update={"message": message})


def _metadata(metadata: MetadataIn | None) -> dict[str, Any] | None:
    # Only the fields the caller gave: front matter fills the rest.
    return metadata.model_dump(exclude_unset=True) if metadata is not None else None
