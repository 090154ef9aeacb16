"""Index health: a read-only audit of the memory against its derived index (issue item 5).

The database is the source of truth and the index is derived (DESIGN §1), so
every check compares what the published version serves, the vectors stored
for the embedder's model, and the forgetting archive with the live rows. A
check never writes anything. Expected lag (chunks queued for the next
``update_index``) is reported as *info*, never as an error.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from memory_pipeline import spool
from memory_pipeline.errors import IndexUnavailableError
from memory_pipeline.index.protocols import IndexSource, IndexView
from memory_pipeline.index.tokenizer import TOKENIZER_ID
from memory_pipeline.store import Store

Severity = Literal["ok", "info", "warning", "error"]
EXAMPLES = 5
NORM_TOLERANCE = 1e-2  # float32 normalisation error is ~1e-6; 1e-2 means "not normalised"
ARCHIVE_KEYS = ("type", "run_id", "chunk_id", "doc_id", "content")
_VECTOR_BATCH = 20_000
_SEVERITY_ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2, "ok": 3}


@dataclass
class HealthFinding:
    check: str
    severity: Severity
    count: int
    message: str
    examples: list[int | str] = field(default_factory=list)


@dataclass
class HealthReport:
    findings: list[HealthFinding]
    healthy: bool  # no finding of severity "error"
    checked_at: dt.datetime
    index_version: int | None
    timings: dict[str, float]  # milliseconds per check
    backend: str = "local"  # where the index lives (HYBRID_RAG_INDEX_BACKEND)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["checked_at"] = self.checked_at.isoformat()
        return data

    def render(self) -> str:
        findings = sorted(self.findings, key=lambda f: _SEVERITY_ORDER[f.severity])
        rows = [
            [f.severity.upper(), f.check, str(f.count), f.message, _examples(f.examples)]
            for f in findings
        ]
        verdict = "healthy" if self.healthy else "UNHEALTHY"
        version = "none" if self.index_version is None else str(self.index_version)
        head = f"memory health: {verdict} ({self.backend} index version {version}, {self.checked_at:%Y-%m-%d %H:%M:%S} UTC)"
        return (
            head + "\n" + render_table(["severity", "check", "count", "message", "examples"], rows)
        )


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table for terminals (shared by the health, stats and duplicate reports)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )
    return "\n".join(lines)


def _examples(values: Sequence[int | str]) -> str:
    return ", ".join(str(v) for v in values)


def _ids(values: np.ndarray) -> list[int | str]:
    return [int(v) for v in values[:EXAMPLES]]


# check -> (severity when ids are found, message then, message when clean); {n} = count.
_RULES: dict[str, tuple[Severity, str, str]] = {
    "debris": ("error", "{n} ids served by the index are neither live nor queued for removal; run rebuild-index", "every id the index serves is live (or queued for removal)"),
    "pending_removal": ("info", "{n} deleted chunks still in the index, queued for the next update-index", "no deletions waiting for update-index"),
    "gaps": ("error", "{n} live chunks are neither in the index nor queued; run rebuild-index", "every live chunk is in the index (or queued)"),
    "pending": ("info", "{n} live chunks queued for the next update-index (searched directly until then)", "no chunks waiting for update-index"),
    "missing_vectors": ("error", "{n} live chunks have no vector of {model!r}: no index can hold them", "every live chunk has a vector of {model!r}"),
    "vectors_finite": ("error", "{n} vectors hold NaN or infinity; re-embed those chunks", "every vector is finite"),
    "vector_dim": ("error", "{n} vectors are not of dimension {dim}; re-embed those chunks", "every vector has dimension {dim}"),
    "vector_norm": ("warning", "{n} vectors are not unit length: inner product is not cosine for them", "every vector is unit length"),
    "dense_sparse": ("error", "dense and sparse disagree on {n} ids ({dense} only dense, {sparse} only sparse); run rebuild-index", "dense and sparse hold the same {total} ids"),
}  # fmt: skip


def _finding(check: str, ids: Sequence[int] | np.ndarray, **fields: object) -> HealthFinding:
    bad, bad_msg, ok_msg = _RULES[check]
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids):
        return HealthFinding(check, bad, len(ids), bad_msg.format(n=len(ids), **fields), _ids(ids))
    return HealthFinding(check, "ok", 0, ok_msg.format(**fields))


@dataclass
class _Context:
    store: Store
    version: IndexView | None
    live: np.ndarray
    queued_adds: np.ndarray
    queued_dels: np.ndarray
    archive_file: Path
    model_id: str
    dim: int | None


Check = Callable[[_Context], list[HealthFinding]]


def _db_snapshot(store: Store) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Live ids and the index-change queue, read in one snapshot."""
    with store.snapshot() as reads:
        live = reads.all_ids()
        queue = reads.pending_changes()
    return live, queue.adds, queue.deletes


def _consistent_view(
    store: Store, reader: IndexSource
) -> tuple[IndexView | None, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The published version and a DB snapshot that belong together.

    A writer publishes first and clears the queue after, so if the version did
    not change across the snapshot, the snapshot's queue still covers every
    chunk the version lacks; otherwise read again (a publish raced us).
    """
    for _attempt in range(3):
        version = reader.current()
        snapshot = _db_snapshot(store)
        again = reader.current()
        if _number(version) == _number(again):
            break
    return again, snapshot


def _number(version: IndexView | None) -> int | None:
    return version.manifest.version if version is not None else None


def check_membership(ctx: _Context) -> list[HealthFinding]:
    if ctx.version is None:
        if not len(ctx.live):
            return [
                HealthFinding("index", "ok", 0, "nothing published yet and the memory is empty")
            ]
        queued = np.isin(ctx.live, ctx.queued_adds).all()
        return [
            HealthFinding(
                "index",
                "warning" if queued else "error",
                len(ctx.live),
                f"no published index but {len(ctx.live)} live chunks; run update-index",
                _ids(ctx.live),
            )
        ]
    version = ctx.version
    members = version.member_ids()
    placed = _placement(ctx.live, ctx.queued_adds, ctx.queued_dels, members)
    if len(placed.debris) or len(placed.gaps):
        live, adds, dels = _db_snapshot(ctx.store)
        again = _placement(live, adds, dels, version.member_ids())
        placed = replace(
            placed,
            debris=np.intersect1d(placed.debris, again.debris),
            gaps=np.intersect1d(placed.gaps, again.gaps),
        )
    return [
        HealthFinding(
            "index", "ok", 0, f"version {version.manifest.version} serves {len(members)} chunks"
        ),
        _finding("debris", placed.debris),
        _finding("pending_removal", placed.removal),
        _finding("gaps", placed.gaps),
        _finding("pending", placed.pending),
    ]


@dataclass(frozen=True)
class _Placement:
    """Where the index's members stand against the live ids and the queue."""

    debris: np.ndarray  # served, neither live nor queued for removal
    removal: np.ndarray  # served, queued for removal
    gaps: np.ndarray  # live, neither served nor queued
    pending: np.ndarray  # live, queued to be added


def _placement(
    live: np.ndarray, adds: np.ndarray, dels: np.ndarray, members: np.ndarray
) -> _Placement:
    """Errors found here are confirmed by a second pair of reads (``check_membership``):
    an index read apart from the store's snapshot (pgvector's tables) puts a chunk whose
    write committed between the two reads out of place in that pair only — added, it is
    served before it is seen live; deleted, it is seen live and no longer served — while
    a real inconsistency stays put."""
    missing = np.setdiff1d(live, members)
    stale = np.setdiff1d(members, live)
    pending = np.intersect1d(missing, adds)
    removal = np.intersect1d(stale, dels)
    return _Placement(
        np.setdiff1d(stale, removal), removal, np.setdiff1d(missing, pending), pending
    )


def check_missing_vectors(ctx: _Context) -> list[HealthFinding]:
    return [
        _finding(
            "missing_vectors", ctx.store.chunks_without_vector(ctx.model_id), model=ctx.model_id
        )
    ]


def _expected_dim(ctx: _Context, models: dict[tuple[str, int], int]) -> int | None:
    if ctx.dim:
        return ctx.dim
    if ctx.version is not None and ctx.version.manifest.dim:
        return ctx.version.manifest.dim
    dims = {d: n for (m, d), n in models.items() if m == ctx.model_id}
    return max(dims, key=lambda d: dims[d]) if dims else None


def check_vectors(ctx: _Context) -> list[HealthFinding]:
    models = ctx.store.vector_counts()
    dim = _expected_dim(ctx, models)
    wrong: list[int] = []
    nonfinite: list[int] = []
    off_norm: list[int] = []
    # The index serves every space: its health is checked against every chunk.
    for rows in ctx.store.iter_vector_rows(ctx.model_id, _VECTOR_BATCH, every_space=True):
        good = [r for r in rows if r[1] == dim and len(r[2]) == 4 * (dim or 0)]
        wrong.extend(int(r[0]) for r in rows if r[1] != dim or len(r[2]) != 4 * (dim or 0))
        if not good:
            continue
        ids = np.asarray([r[0] for r in good], dtype=np.int64)
        mat = np.frombuffer(b"".join(r[2] for r in good), dtype=np.float32).reshape(len(good), -1)
        finite = np.isfinite(mat).all(axis=1)
        nonfinite.extend(ids[~finite].tolist())
        norms = np.linalg.norm(mat[finite].astype(np.float64), axis=1)
        off_norm.extend(ids[finite][np.abs(norms - 1.0) > NORM_TOLERANCE].tolist())
    return [
        _finding("vectors_finite", nonfinite),
        _finding("vector_dim", wrong, dim=dim),
        _finding("vector_norm", off_norm),
    ]


def check_models(ctx: _Context) -> list[HealthFinding]:
    """One embedding space throughout (DESIGN §1): store, published index and embedder agree."""
    foreign: dict[str, int] = {}
    for (m, _d), n in ctx.store.vector_counts().items():
        if m != ctx.model_id:
            foreign[m] = foreign.get(m, 0) + n
    findings: list[HealthFinding] = []
    if foreign:
        listed = ", ".join(f"{m} ({n} vectors)" for m, n in sorted(foreign.items()))
        message = f"vectors of other models than {ctx.model_id!r} are stored: {listed}"
        examples = list[int | str](sorted(foreign))[:EXAMPLES]
        findings.append(
            HealthFinding("model_ids", "error", sum(foreign.values()), message, examples)
        )
    man = ctx.version.manifest if ctx.version else None
    # A dimension of 0 or None means "unknown" (an empty index, no embedder dim given).
    if man and (man.model_id, man.dim or ctx.dim) != (ctx.model_id, ctx.dim or man.dim):
        message = (
            f"the published index is {man.model_id!r} (dim {man.dim}), the embedder "
            f"{ctx.model_id!r} (dim {ctx.dim}); run rebuild-index"
        )
        findings.append(HealthFinding("model_ids", "error", 1, message, [man.model_id]))
    return findings or [
        HealthFinding("model_ids", "ok", 0, f"one model throughout: {ctx.model_id}")
    ]


def check_dense_sparse(ctx: _Context) -> list[HealthFinding]:
    if ctx.version is None:
        return []
    try:
        sparse_ids = ctx.version.stored_sparse_ids()
    except IndexUnavailableError as exc:
        return [HealthFinding("dense_sparse", "error", 1, f"sparse index unreadable: {exc}")]
    dense_ids = ctx.version.member_ids()
    only_dense = np.setdiff1d(dense_ids, sparse_ids)
    only_sparse = np.setdiff1d(sparse_ids, dense_ids)
    # A change still queued may have reached one side and not yet the other (a vector
    # service killed mid-update): the next update completes it, searches score it already.
    queued = np.union1d(ctx.queued_adds, ctx.queued_dels)
    disagree = np.setdiff1d(np.union1d(only_dense, only_sparse), queued)
    if len(disagree):  # confirmed by a second pair of reads, as in check_membership
        _, adds, dels = _db_snapshot(ctx.store)
        sparse_again = ctx.version.stored_sparse_ids()
        dense_again = ctx.version.member_ids()
        again = np.setdiff1d(np.setxor1d(dense_again, sparse_again), np.union1d(adds, dels))
        disagree = np.intersect1d(disagree, again)
    stale: list[HealthFinding] = []
    if ctx.version.manifest.stale_tokens:
        stale.append(
            HealthFinding(
                "tokenizer",
                "warning",
                1,
                f"the BM25 index was built with tokenizer {ctx.version.manifest.tokenizer!r}, "
                f"queries use {TOKENIZER_ID!r}; run update-index (it rebuilds the index)",
                [ctx.version.manifest.tokenizer],
            )
        )
    return [
        *stale,
        _finding(
            "dense_sparse",
            disagree,
            dense=len(only_dense),
            sparse=len(only_sparse),
            total=len(dense_ids),
        ),
    ]


def check_archive(ctx: _Context) -> list[HealthFinding]:
    if not ctx.archive_file.exists():
        return [HealthFinding("archive", "ok", 0, f"no archive yet ({ctx.archive_file})")]
    bad: list[int | str] = []
    total = 0
    with ctx.archive_file.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            total += 1
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                bad.append(number)
                continue
            if not isinstance(record, dict) or any(k not in record for k in ARCHIVE_KEYS):
                bad.append(number)
    if bad:
        # A warning, not an error: the archive writer leaves a torn line behind when a run is
        # killed mid-write, and such a run never removed its chunks. Still worth a look.
        message = (
            f"{len(bad)} of {total} archive lines are not JSON objects with "
            f"{', '.join(ARCHIVE_KEYS)} and cannot be restored (examples are line numbers)"
        )
        return [HealthFinding("archive", "warning", len(bad), message, bad[:EXAMPLES])]
    return [HealthFinding("archive", "ok", 0, f"{total} archive lines parse")]


def capture_findings(folder: Path) -> list[HealthFinding]:
    """The capture folder (``spool.status``): a worker that could not run is an error
    (sessions are not being stored), captures or a ledger set aside a warning, captures
    waiting for a worker info."""
    state = spool.status(folder)
    findings = []
    see = f"; `{spool.STATUS_COMMAND}` shows why"
    if state.failure is not None:
        reason = (
            f"the capture worker could not run ({state.failure['at']}): {state.failure['reason']}"
        )
        findings.append(HealthFinding("capture", "error", len(state.waiting), reason + see))
    elif state.waiting:
        message = f"{len(state.waiting)} captured sessions wait for the capture worker"
        findings.append(HealthFinding("capture", "info", len(state.waiting), message))
    if state.kept or state.ledgers:
        message = (
            f"{len(state.kept)} captured sessions and {len(state.ledgers)} capture ledgers "
            f"were set aside, not stored{see}"
        )
        names: list[int | str] = [k.capture.session_id for k in state.kept]
        names += [p.name for p in state.ledgers]
        findings.append(HealthFinding("capture", "warning", len(names), message, names[:EXAMPLES]))
    return findings or [
        HealthFinding("capture", "ok", 0, "no captured session waits or was set aside")
    ]


CHECKS: dict[str, Check] = {
    "membership": check_membership,
    "missing_vectors": check_missing_vectors,
    "vectors": check_vectors,
    "models": check_models,
    "dense_sparse": check_dense_sparse,
    "archive": check_archive,
}


def index_health(
    store: Store,
    reader: IndexSource,
    archive_file: Path,
    model_id: str,
    dim: int | None,
    *,
    backend: str = "local",
    capture_dir: Path | None = None,
) -> HealthReport:
    """Run every check in :data:`CHECKS`, and of the capture folder when given; read-only.
    ``healthy`` is False on any error."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    try:
        version, (live, adds, dels) = _consistent_view(store, reader)
    except IndexUnavailableError as exc:
        # An unreadable index still leaves the database and archive worth checking.
        unreadable: HealthFinding | None = HealthFinding("index", "error", 1, str(exc))
        live, adds, dels = _db_snapshot(store)
        version = None
    else:
        unreadable = None
    timings["snapshot"] = (time.perf_counter() - started) * 1000
    ctx = _Context(store, version, live, adds, dels, archive_file, model_id, dim)
    findings: list[HealthFinding] = [unreadable] if unreadable else []
    for name, check in CHECKS.items():
        if unreadable and name == "membership":
            continue
        started = time.perf_counter()
        findings.extend(check(ctx))
        timings[name] = (time.perf_counter() - started) * 1000
    if capture_dir is not None:
        started = time.perf_counter()
        findings.extend(capture_findings(capture_dir))
        timings["capture"] = (time.perf_counter() - started) * 1000
    return HealthReport(
        findings=findings,
        healthy=not any(f.severity == "error" for f in findings),
        checked_at=dt.datetime.now(dt.UTC),
        index_version=_number(version),
        timings=timings,
        backend=backend,
    )
