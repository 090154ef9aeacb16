"""Asset checks of the ingestion assets, read from the core's health and stats reports.

* ``sources_parse`` (documents, WARN): source files that could not be read or parsed.
* ``sources_ingested`` (documents, ERROR): files under the roots whose current content is
  not in the store (new, changed, failing to parse), named; a killed run shows here.
* ``tagging_coverage`` (chunks, WARN): share of chunks with a tag below a configured floor.
* ``vectors_valid`` (embeddings, ERROR, blocking): finite vectors of the embedder's
  dimension under one model id, a vector for every live chunk. A failure stops the
  run before ``search_index`` publishes anything.
* ``index_consistency`` (search_index, ERROR): every id the index serves is live
  (no debris), every live chunk is served or queued (no gaps), dense and BM25 agree.
"""

from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from memory_pipeline.config import DEFAULT_TAG_COVERAGE_FLOOR
from memory_pipeline.memory.health import HealthFinding, HealthReport
from memory_pipeline.pipeline.ingestion.assets import embeddings, search_index
from memory_pipeline.pipeline.resources import MemoryResource, SourcesResource
from memory_pipeline.sources.ledger import read_ledger
from memory_pipeline.sources.status import describe_not_ingested, not_ingested, plural

VECTOR_CHECKS = ("vectors_finite", "vector_dim", "model_ids", "missing_vectors")
INDEX_CHECKS = ("index", "debris", "gaps", "dense_sparse")


def _errors(report: HealthReport, checks: Sequence[str]) -> list[HealthFinding]:
    return [f for f in report.findings if f.check in checks and f.severity == "error"]


def _counts(report: HealthReport, checks: Sequence[str]) -> dict[str, int]:
    return {f.check: f.count for f in report.findings if f.check in checks}


def _problems(findings: Sequence[HealthFinding]) -> dg.MetadataValue:
    lines = [
        f"- **{f.check}** ({f.count}): {f.message}"
        + (f" — e.g. {', '.join(str(e) for e in f.examples)}" if f.examples else "")
        for f in findings
    ]
    return dg.MetadataValue.md("\n".join(lines) if lines else "_none_")


@dg.asset_check(
    asset="documents",
    name="sources_parse",
    description="Source files that could not be read or parsed (WARN, with the file names).",
)
def sources_parse(sources: SourcesResource) -> dg.AssetCheckResult:
    cfg = sources.config()
    if cfg is None:
        return dg.AssetCheckResult(passed=True, metadata={"sources_file": "not configured"})
    failures = {
        path: entry
        for path, entry in read_ledger(cfg.state_path).failures().items()
        if Path(path).exists()  # a removed file no longer needs fixing
    }
    listing = "\n".join(f"- `{Path(p).name}` ({p}): {e.error}" for p, e in sorted(failures.items()))
    return dg.AssetCheckResult(
        passed=not failures,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{plural(len(failures), 'source file')} failed: "
            + ", ".join(Path(p).name for p in sorted(failures))
            if failures
            else "every source file parsed"
        ),
        metadata={
            "failed_files": len(failures),
            "files": dg.MetadataValue.md(listing or "_none_"),
        },
    )


def build_tagging_coverage_check(floor: float) -> dg.AssetChecksDefinition:
    """The coverage check with its floor (a share in [0, 1]) fixed at the composition root."""

    @dg.asset_check(
        asset="chunks",
        name="tagging_coverage",
        description=f"Share of chunks with at least one tag; WARN below {floor:.0%}.",
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
    description="Vectors finite, of the embedder's dimension, one model id, one per live chunk "
    "(ERROR; blocks the index publication).",
)
def vectors_valid(memory: MemoryResource) -> dg.AssetCheckResult:
    report = memory.system().index_health()
    bad = _errors(report, VECTOR_CHECKS)
    return dg.AssetCheckResult(
        passed=not bad,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f.message for f in bad) or "vectors are sound",
        metadata={**_counts(report, VECTOR_CHECKS), "problems": _problems(bad)},
    )


@dg.asset_check(
    asset=search_index,
    description="Index ↔ database: no debris (served ids not live), no gaps (live chunks "
    "neither served nor queued), dense and BM25 agree (ERROR).",
)
def index_consistency(memory: MemoryResource) -> dg.AssetCheckResult:
    report = memory.system().index_health()
    bad = _errors(report, INDEX_CHECKS)
    counts = _counts(report, (*INDEX_CHECKS, "pending", "pending_removal"))
    return dg.AssetCheckResult(
        passed=not bad,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f.message for f in bad) or "index and database agree",
        metadata={
            **counts,
            "index_version": report.index_version if report.index_version is not None else -1,
            "problems": _problems(bad),
        },
    )


@dg.asset_check(
    asset="documents",
    name="sources_ingested",
    description="Every file under the source roots is in the store as it is now; ERROR "
    "naming those that are new, changed or failing to parse.",
)
def sources_ingested(memory: MemoryResource, sources: SourcesResource) -> dg.AssetCheckResult:
    cfg = sources.config()
    if cfg is None:
        return dg.AssetCheckResult(passed=True, metadata={"sources_file": "not configured"})
    behind = not_ingested(memory.store(), cfg, read_ledger(cfg.state_path))
    by_state: dict[str, int] = {}
    for s in behind:
        by_state[s.state.value] = by_state.get(s.state.value, 0) + 1
    lines = describe_not_ingested(behind)
    return dg.AssetCheckResult(
        passed=not behind,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            f"{plural(len(behind), 'source file')} {'is' if len(behind) == 1 else 'are'} "
            "not in the store: "
            + ", ".join(s.path.name for s in behind[:10])
            + (" …" if len(behind) > 10 else "")
            if behind
            else "every source file is in the store"
        ),
        metadata={
            "not_ingested": len(behind),
            **{f"files_{state}": n for state, n in sorted(by_state.items())},
            "files": dg.MetadataValue.md("\n".join(f"- {line}" for line in lines) or "_none_"),
        },
    )


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
