"""Asset checks of the ingestion assets, read from the core's health and stats reports.

* ``sources_parse`` (documents, WARN): source files whose current content a sync
  refused (unreadable, or the parser's reason). It alone owns a refused file.
* ``sources_ingested`` (documents, ERROR): accounts for every file under the roots —
  in the store as it is now, refused (``sources_parse``'s), or unsupported (listed by
  extension, not a failure) — and fails naming the rest: new, changed, or not yet
  tried; a killed run shows here.
* ``tagging_coverage`` (chunks, WARN): share of chunks with a tag below a configured floor.
* ``vectors_valid`` (embeddings, ERROR, blocking): finite vectors of the embedder's
  dimension under one model id, a vector for every live chunk. A failure stops the
  run before ``search_index`` publishes anything.
* ``index_consistency`` (search_index, ERROR): every id the index serves is live
  (no debris), every live chunk is served or queued (no gaps), dense and BM25 agree.

The severity is Dagster's field of each result; descriptions say what is checked.
Each failing result names its failing items under ``FAILING_ITEMS`` (file paths, or
the health findings that failed), which the alerts sensor compares between ticks.
"""

from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from memory_pipeline.config import DEFAULT_TAG_COVERAGE_FLOOR
from memory_pipeline.memory.health import HealthFinding, HealthReport
from memory_pipeline.pipeline.alerts import FAILING_ITEMS
from memory_pipeline.pipeline.ingestion.assets import embeddings, listing, search_index
from memory_pipeline.pipeline.resources import MemoryResource, SourcesResource
from memory_pipeline.sources.ledger import read_ledger
from memory_pipeline.sources.status import (
    NOT_INGESTED,
    FileState,
    deleted_statuses,
    describe_not_ingested,
    file_status,
    plural,
    refused,
    survey,
)

# The health findings each check reads, under the metadata key its count is shown as:
# every one counts problems (0 is good), which the findings' own names do not all say.
VECTOR_CHECKS = {
    "vectors_finite": "vectors_not_finite",
    "vector_dim": "vectors_of_wrong_dim",
    "model_ids": "vectors_of_other_models",
    "missing_vectors": "chunks_without_vector",
}
INDEX_CHECKS = {
    "index": "problems_in_index",
    "debris": "debris",
    "gaps": "gaps",
    "dense_sparse": "dense_sparse_mismatches",
}
INDEX_WAITING = ("pending", "pending_removal")  # chunks waiting for the next update: no fault
MAX_ITEMS_LISTED = 100  # failing items named in a result; the counts are complete


def _errors(report: HealthReport, checks: dict[str, str]) -> list[HealthFinding]:
    return [f for f in report.findings if f.check in checks and f.severity == "error"]


def _counts(report: HealthReport, checks: dict[str, str]) -> dict[str, int]:
    return {checks[f.check]: f.count for f in report.findings if f.check in checks}


def _items(names: Sequence[str]) -> dg.MetadataValue:
    return dg.MetadataValue.json(list(names[:MAX_ITEMS_LISTED]))


def _problems(findings: Sequence[HealthFinding], names: dict[str, str]) -> dg.MetadataValue:
    lines = [
        f"- **{names[f.check]}** ({f.count}): {f.message}"
        + (f" — e.g. {', '.join(str(e) for e in f.examples)}" if f.examples else "")
        for f in findings
    ]
    return dg.MetadataValue.md("\n".join(lines) if lines else "_none_")


def _unsupported(
    paths: Sequence[Path], by_extension: dict[str, int]
) -> dict[str, dg.MetadataValue]:
    return {
        "files_unsupported": dg.MetadataValue.int(len(paths)),
        "files_unsupported_by_extension": dg.MetadataValue.json(by_extension),
        "unsupported": listing([str(p) for p in paths]),
    }


@dg.asset_check(
    asset="documents",
    name="sources_parse",
    description="Source files whose current content could not be read or parsed, named with "
    "the reason. This check alone owns a refused file; sources_ingested leaves it out.",
)
def sources_parse(sources: SourcesResource) -> dg.AssetCheckResult:
    cfg = sources.config()
    if cfg is None:
        return dg.AssetCheckResult(passed=True, metadata={"sources_file": "not configured"})
    failures = refused(cfg, read_ledger(cfg.state_path))
    listing = "\n".join(f"- `{p.name}` ({p}): {reason}" for p, reason in failures.items())
    return dg.AssetCheckResult(
        passed=not failures,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{plural(len(failures), 'source file')} failed: " + ", ".join(p.name for p in failures)
            if failures
            else "every source file parsed"
        ),
        metadata={
            "failed_files": len(failures),
            "files": dg.MetadataValue.md(listing or "_none_"),
            FAILING_ITEMS: _items([str(p) for p in failures]),
        },
    )


def build_tagging_coverage_check(floor: float) -> dg.AssetChecksDefinition:
    """The coverage check with its floor (a share in [0, 1]) fixed at the composition root."""

    @dg.asset_check(
        asset="chunks",
        name="tagging_coverage",
        description=f"Share of chunks with at least one tag, against a floor of {floor:.0%}.",
    )
    def tagging_coverage(memory: MemoryResource) -> dg.AssetCheckResult:
        stats = memory.system().system_stats()
        unset = sum(k.chunks for k in stats.by_knowledge_type if k.knowledge_type == "unset")
        passed = stats.chunks == 0 or stats.tag_coverage >= floor
        return dg.AssetCheckResult(
            passed=passed,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"{stats.tag_coverage:.0%} of {stats.chunks} chunks are tagged "
            f"(floor {floor:.0%})",
            metadata={
                "tag_coverage": round(stats.tag_coverage, 4),
                "floor": floor,
                "tagged_chunks": stats.tagged_chunks,
                "chunks": stats.chunks,
                "distinct_tags": stats.distinct_tags,
                "knowledge_type_unset": unset,
            },
        )

    return tagging_coverage


@dg.asset_check(
    asset=embeddings,
    blocking=True,
    description="Vectors finite, of the embedder's dimension, under one model id, one per live "
    "chunk; a failure blocks the index publication.",
)
def vectors_valid(memory: MemoryResource) -> dg.AssetCheckResult:
    report = memory.system().index_health()
    bad = _errors(report, VECTOR_CHECKS)
    return dg.AssetCheckResult(
        passed=not bad,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f.message for f in bad) or "vectors are sound",
        metadata={
            **_counts(report, VECTOR_CHECKS),
            "problems": _problems(bad, VECTOR_CHECKS),
            FAILING_ITEMS: _items([VECTOR_CHECKS[f.check] for f in bad]),
        },
    )


@dg.asset_check(
    asset=search_index,
    description="Index ↔ database: no debris (served ids not live), no gaps (live chunks "
    "neither served nor queued), dense and BM25 agree.",
)
def index_consistency(memory: MemoryResource) -> dg.AssetCheckResult:
    report = memory.system().index_health()
    bad = _errors(report, INDEX_CHECKS)
    waiting = {f.check: f.count for f in report.findings if f.check in INDEX_WAITING}
    return dg.AssetCheckResult(
        passed=not bad,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f.message for f in bad) or "index and database agree",
        metadata={
            **_counts(report, INDEX_CHECKS),
            **waiting,
            "index_version": report.index_version if report.index_version is not None else -1,
            "problems": _problems(bad, INDEX_CHECKS),
            FAILING_ITEMS: _items([INDEX_CHECKS[f.check] for f in bad]),
        },
    )


@dg.asset_check(
    asset="documents",
    name="sources_ingested",
    description="Every file under the source roots is accounted for: in the store as it is "
    "now, refused with a reason (named by sources_parse), or unsupported (listed by extension, "
    "not a failure). Fails naming the files that are new or changed and not stored yet.",
)
def sources_ingested(memory: MemoryResource, sources: SourcesResource) -> dg.AssetCheckResult:
    cfg = sources.config()
    if cfg is None:
        return dg.AssetCheckResult(passed=True, metadata={"sources_file": "not configured"})
    ledger = read_ledger(cfg.state_path)
    store = memory.store()
    found = survey(cfg)
    statuses = [file_status(store, f, ledger) for f in found.files]
    statuses += deleted_statuses(store, cfg, ledger, [f.path for f in found.files])
    owned_by_parse = refused(cfg, ledger)
    behind = [s for s in statuses if s.state in NOT_INGESTED and s.path not in owned_by_parse]
    by_state: dict[str, int] = {}
    for s in behind:
        by_state[s.state.value] = by_state.get(s.state.value, 0) + 1
    lines = describe_not_ingested(behind)
    ingested = sum(s.state is FileState.INGESTED for s in statuses)
    return dg.AssetCheckResult(
        passed=not behind,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            f"{plural(len(behind), 'source file')} {'is' if len(behind) == 1 else 'are'} "
            "not in the store: "
            + ", ".join(s.path.name for s in behind[:10])
            + (" …" if len(behind) > 10 else "")
            if behind
            else _accounted(ingested, len(owned_by_parse), len(found.unsupported))
        ),
        metadata={
            "not_ingested": len(behind),
            **{f"files_{state}": n for state, n in sorted(by_state.items())},
            "files_under_roots": len(found.files) + len(found.unsupported),
            "files_ingested": ingested,
            "files_refused": len(owned_by_parse),
            **_unsupported(found.unsupported, found.unsupported_by_extension()),
            "files": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines) or "_none_"),
            FAILING_ITEMS: _items([str(s.path) for s in behind]),
        },
    )


def _accounted(ingested: int, refused: int, unsupported: int) -> str:
    """The passing description: where every file under the roots went."""
    parts = [f"{plural(ingested, 'file')} in the store"]
    if refused:
        parts.append(f"{refused} refused (sources_parse names them)")
    if unsupported:
        parts.append(f"{unsupported} unsupported (listed, not ingested)")
    return "every file under the roots is accounted for: " + ", ".join(parts)


def build_checks(
    *, tag_coverage_floor: float = DEFAULT_TAG_COVERAGE_FLOOR
) -> list[dg.AssetChecksDefinition]:
    return [
        sources_parse,
        sources_ingested,
        build_tagging_coverage_check(tag_coverage_floor),
        vectors_valid,
        index_consistency,
    ]
