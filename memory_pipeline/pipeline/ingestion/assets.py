"""Ingestion assets: source files → documents / chunks → embeddings → search index.

Each asset calls the core and records what it did as materialization metadata
(counts, totals, versions, model id, seconds), so the UI charts the memory's
history. Plain numbers are recorded as numbers: Dagster plots those over time.
"""

import time
from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

from memory_pipeline.pipeline.resources import MemoryResource, SourcesResource
from memory_pipeline.sources.ledger import open_ledger, read_ledger
from memory_pipeline.sources.sync import SyncPlan, SyncReport, apply_sync, plan_sync

GROUP = "ingestion"
# One writer at a time: index publication (the core adds its file lock) and source syncs.
INDEX_POOL = "index_writer"
INGEST_POOL = "source_ingest"
MAX_LISTED = 20  # file names shown in metadata; the counts are complete


class SourceFilesConfig(dg.Config):
    """Which files to look at. Both lists unset: every file under every root."""

    paths: list[str] | None = None  # new or changed files (the change sensor fills this)
    deleted: list[str] | None = None  # removed files: their documents are deleted


def listing(paths: Sequence[str]) -> dg.MetadataValue:
    """Up to ``MAX_LISTED`` paths as a Markdown list, with how many more there are."""
    shown = "\n".join(f"- `{p}`" for p in paths[:MAX_LISTED])
    more = f"\n- … and {len(paths) - MAX_LISTED} more" if len(paths) > MAX_LISTED else ""
    return dg.MetadataValue.md(shown + more if paths else "_none_")


@dg.asset(
    group_name=GROUP,
    kinds={"python", "yaml"},
    description="Files under the source roots, and the plan of what to ingest or delete.",
)
def source_files(
    context: dg.AssetExecutionContext,
    config: SourceFilesConfig,
    memory: MemoryResource,
    sources: SourcesResource,
) -> dg.Output[SyncPlan]:
    started = time.perf_counter()
    cfg = sources.config()
    if cfg is None:
        context.log.warning("no sources file configured (MEMORY_PIPELINE_SOURCES); nothing to do")
        return dg.Output(SyncPlan("none"), metadata={"sources_file": "not configured"})
    ledger = read_ledger(cfg.state_path)
    plan = plan_sync(memory.store(), cfg, ledger, paths=config.paths, deleted=config.deleted)
    if plan.ignored:
        context.log.info(f"ignored (outside every root, or unknown): {plan.ignored}")
    if plan.unsupported:
        by_ext = ", ".join(f"{ext} {n}" for ext, n in plan.unsupported_by_extension.items())
        context.log.info(f"{len(plan.unsupported)} unsupported files under the roots ({by_ext})")
    metadata: dict[str, Any] = {
        "mode": plan.mode,
        "sources_file": str(cfg.file),
        "roots": len(cfg.roots),
        "files_under_roots": plan.files_under_roots,
        "files_to_ingest": len(plan.ingest),
        "files_to_delete": len(plan.delete),
        "files_ignored": len(plan.ignored),
        "files_unsupported": len(plan.unsupported),
        "files_unsupported_by_extension": dg.MetadataValue.json(plan.unsupported_by_extension),
        "unsupported": listing(plan.unsupported),
        "files_failed_before": len(ledger.failures()),
        "to_ingest": listing(plan.ingest),
        "to_delete": listing(plan.delete),
        "seconds": round(time.perf_counter() - started, 3),
    }
    metadata.update({f"files_{state}": n for state, n in sorted(plan.states.items())})
    return dg.Output(plan, metadata=metadata)


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "documents",
            deps=[source_files],
            group_name=GROUP,
            kinds={"sqlite"},
            description="Documents in the store, one per source file or conversation.",
        ),
        dg.AssetSpec(
            "chunks",
            deps=["documents"],
            group_name=GROUP,
            kinds={"sqlite"},
            description="Chunks of the stored documents, with their memory fields and tags.",
        ),
    ],
    ins={"plan": dg.AssetIn(source_files.key)},
    pool=INGEST_POOL,
)
def documents_and_chunks(
    context: dg.AssetExecutionContext,
    plan: SyncPlan,
    memory: MemoryResource,
    sources: SourcesResource,
) -> Iterator[dg.MaterializeResult]:
    cfg = sources.config()
    system = memory.system()
    if cfg is None or (not plan.ingest and not plan.delete):
        report = SyncReport()
    else:
        with open_ledger(cfg.state_path) as ledger:
            report = apply_sync(system, cfg, plan, ledger, actor="pipeline")
    for path, reason in sorted(report.failed.items()):
        context.log.warning(f"not ingested: {path}: {reason}")
    for warning in report.warnings:
        context.log.warning(warning)
    counts = system.counts()
    yield dg.MaterializeResult(
        asset_key="documents",
        metadata={
            "documents_added": report.documents_added,
            "documents_changed": report.documents_replaced,
            "documents_removed": report.documents_removed,
            "documents_unchanged": report.documents_unchanged,
            "sessions_skipped": report.sessions_skipped,
            "files_failed": len(report.failed),
            "documents_total": counts["documents"],
            "failed": listing([f"{p}: {r}" for p, r in sorted(report.failed.items())]),
            "seconds": round(report.seconds, 3),
        },
    )
    yield dg.MaterializeResult(
        asset_key="chunks",
        metadata={
            "chunks_added": report.chunks_added,
            "chunks_removed": report.chunks_removed,
            "chunks_total": counts["chunks"],
            "chunks_waiting_for_index": system.waiting_for_index(),
            "vectors_embedded": report.embedded,
            "vectors_reused": report.reused_vectors,
            # what the redaction step took out of the texts stored (docs/hygiene.md)
            "redacted_total": sum(report.redactions.values()),
            "redacted_by_kind": dg.MetadataValue.json(dict(sorted(report.redactions.items()))),
            # documents kept whole after an opening <private> never closed, by file and line
            "unclosed_tags": len(report.warnings),
            "unclosed_tag_warnings": listing(report.warnings),
        },
    )


@dg.asset(
    deps=["chunks"],
    group_name=GROUP,
    kinds={"numpy", "sqlite"},
    description="Chunk vectors stored per model id (computed at ingest, never on rebuild).",
)
def embeddings(memory: MemoryResource) -> dg.MaterializeResult:
    started = time.perf_counter()
    system = memory.system()
    model_id = system.model_id
    models = system.embedding_models()
    dim, vectors = models.get(model_id, (0, 0))
    return dg.MaterializeResult(
        metadata={
            "model_id": model_id,
            "dim": dim,
            "vectors_total": vectors,
            "vectors_other_models": sum(n for m, (_d, n) in models.items() if m != model_id),
            "chunks_waiting_for_index": system.waiting_for_index(),
            "seconds": round(time.perf_counter() - started, 3),
        }
    )


@dg.asset(
    deps=[embeddings],
    group_name=GROUP,
    kinds={"faiss", "tantivy"},
    pool=INDEX_POOL,
    description="The published hybrid index (FAISS + BM25): the store's queued changes taken in.",
)
def search_index(memory: MemoryResource) -> dg.MaterializeResult:
    system = memory.system()
    result = system.update_index()
    loaded = system.published()
    manifest = loaded.manifest if loaded else None
    return dg.MaterializeResult(
        metadata={
            "index_version": result.version,
            "update_kind": result.kind,
            "chunks_added": result.added,
            "chunks_removed": result.removed,
            "vectors_indexed": result.n_dense,
            "bm25_documents": result.n_sparse,
            "index_size_bytes": loaded.size_bytes() if loaded else 0,
            "index_backend": system.backend.name,
            "model_id": manifest.model_id if manifest else system.model_id,
            "dim": manifest.dim if manifest else 0,
            "seconds": round(result.seconds, 3),
        }
    )


ASSETS = [source_files, documents_and_chunks, embeddings, search_index]
