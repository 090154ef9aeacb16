"""Maintenance assets: the forgetting report and the scrub report (each a dry run unless a
person asks otherwise)."""

import datetime as dt
import time

import dagster as dg

from memory_pipeline.evaluation import forgetting_cost
from memory_pipeline.memory.forgetting import score_candidates
from memory_pipeline.memory.scoring import MemoryParams
from memory_pipeline.pipeline.evaluation.resources import EvaluationResource
from memory_pipeline.pipeline.ingestion.assets import INDEX_POOL
from memory_pipeline.pipeline.resources import MemoryResource
from memory_pipeline.system import MemorySystem

GROUP = "maintenance"


class ForgettingConfig(dg.Config):
    """The forgetting batch's knobs. ``dry_run: false`` archives and removes the candidates."""

    dry_run: bool = True
    # Unset: the memory's configured values (HYBRID_RAG_FORGET_*).
    score_threshold: float | None = None
    max_fraction: float | None = None
    force: bool = False
    time_weight: float | None = None
    freq_weight: float | None = None
    importance_threshold: float | None = None


@dg.asset(
    deps=["chunks"],
    group_name=GROUP,
    kinds={"python"},
    # A real run removes chunks and updates the index: it queues behind other index writers.
    pool=INDEX_POOL,
    description="Chunks the memory axis would forget (importance cut or low memory score). "
    "A dry-run report by default; `dry_run: false` archives them to JSONL and removes them.",
)
def forgetting_candidates(
    context: dg.AssetExecutionContext,
    config: ForgettingConfig,
    memory: MemoryResource,
    evaluation: EvaluationResource,
) -> dg.MaterializeResult:
    system = memory.system()
    # Measured before anything is archived, so a person sees the cost before launching it.
    cost = _golden_cost(system, config, evaluation) if config.dry_run else {}
    report = system.run_forgetting_batch(
        memory=_memory(system, config),
        score_threshold=config.score_threshold,
        dry_run=config.dry_run,
        max_fraction=config.max_fraction,
        force=config.force,
    )
    context.log.info(report.render())
    by_reason: dict[str, int] = {}
    for counts in report.by_type.values():
        for reason, n in counts.items():
            by_reason[reason] = by_reason.get(reason, 0) + n
    rows = [
        f"| {'cut' if c.score is None else f'{c.score:.4f}'} | `{c.doc_id}#{c.chunk_index}` "
        f"| {c.knowledge_type or '-'} | {c.reason} | {c.age_days:.0f} | {c.snippet} |"
        for c in report.examples
    ]
    table = "| score | chunk | type | reason | age (days) | text |\n|---|---|---|---|---|---|\n"
    return dg.MaterializeResult(
        metadata={
            "dry_run": report.dry_run,
            "live_chunks": report.live_chunks,
            "candidates": report.candidates,
            "candidate_share": round(report.candidates / report.live_chunks, 4)
            if report.live_chunks
            else 0.0,
            "archived": report.archived,
            "limit": report.limit,
            "refused": report.refused,
            **{f"candidates_{reason}": n for reason, n in sorted(by_reason.items())},
            "by_type": dg.MetadataValue.json(report.by_type),
            "lowest_scoring": dg.MetadataValue.md(table + "\n".join(rows) if rows else "_none_"),
            "index_version": report.index_version if report.index_version is not None else -1,
            "seconds": round(report.timings_s.get("total", 0.0), 3),
            **cost,
            **_edits(system),
        }
    )


#: The edits the forgetting report shows: those of the week before it (its schedule's period).
EDITS_WINDOW = dt.timedelta(days=7)
EDITS_LISTED = 20


def _edits(system: MemorySystem) -> dict[str, dg.MetadataValue | int]:
    """The memory's recorded edits of the last week (``memory-pipeline history``): they
    move the candidates (an importance set, a knowledge type changed). By whom, the
    latest listed, and how many of the agent's wait for a person's verdict."""
    since = dt.datetime.now(dt.UTC) - EDITS_WINDOW
    recent = [c for c in system.history(10_000) if c.at >= since]
    by_actor: dict[str, int] = {}
    for change in recent:
        by_actor[change.actor] = by_actor.get(change.actor, 0) + 1
    rows = [
        f"| {c.at:%Y-%m-%d %H:%M} | {c.actor} | `{c.doc_id}`"
        + (f"#{c.chunk_index}" if c.chunk_index is not None else "")
        + f" | {c.what} | {c.review or ''} |"
        for c in recent[:EDITS_LISTED]
    ]
    head = "| when (UTC) | by | where | what | verdict |\n|---|---|---|---|---|\n"
    return {
        "edits_last_7_days": len(recent),
        "edits_by_actor": dg.MetadataValue.json(dict(sorted(by_actor.items()))),
        "recent_edits": dg.MetadataValue.md(head + "\n".join(rows) if rows else "_none_"),
        "agent_changes_awaiting_review": system.store.count_proposals(),
    }


def _memory(system: MemorySystem, config: ForgettingConfig) -> MemoryParams:
    """The memory axis as configured, with the weights this run sets."""
    return system.settings.memory_params(
        time_weight=config.time_weight,
        freq_weight=config.freq_weight,
        importance_threshold=config.importance_threshold,
    )


def _golden_cost(
    system: MemorySystem, config: ForgettingConfig, evaluation: EvaluationResource
) -> dict[str, dg.MetadataValue | float]:
    """Golden-set metrics with and without the candidates (empty when no golden set)."""
    golden = evaluation.golden()
    if golden is None:
        return {}
    params = _memory(system, config)
    threshold = config.score_threshold
    if threshold is None:
        threshold = system.settings.forgetting.score_threshold
    _live, candidates = score_candidates(
        system.store,
        params,
        threshold,
        dt.datetime.now(dt.UTC),
        system.settings.forgetting.grace_days,
    )
    cost = forgetting_cost(system, golden, [c.chunk_id for c in candidates])
    before = cost.with_candidates.variant().summary
    after = cost.without_candidates.variant().summary
    out: dict[str, dg.MetadataValue | float] = {
        "golden_cost": dg.MetadataValue.md("\n".join(f"- {line}" for line in cost.summary_lines()))
    }
    for metric in ("ndcg@10", "recall@10"):
        if metric in before and metric in after:
            key = metric.replace("@", "_at_")
            out[f"golden_{key}_with_candidates"] = round(before[metric], 4)
            out[f"golden_{key}_without_candidates"] = round(after[metric], 4)
    return out


class ScrubConfig(dg.Config):
    """The scrub's one knob: ``dry_run: false`` takes out what it finds (``memory/scrub.py``)."""

    dry_run: bool = True


#: Places the scrub report lists (kind and place, never a value); the rest are counted.
SCRUB_PLACES_SHOWN = 50


@dg.asset(
    deps=["chunks"],
    group_name=GROUP,
    kinds={"python"},
    # A real scrub rewrites chunks and rebuilds the index: it queues behind index writers.
    pool=INDEX_POOL,
    description="Secrets and <private> spans the memory already holds, by kind and place "
    "(never a value). A dry run by default; `dry_run: false` takes them out of every file "
    "(memory-pipeline scrub --apply).",
)
def scrub_report(
    context: dg.AssetExecutionContext, config: ScrubConfig, memory: MemoryResource
) -> dg.MaterializeResult:
    started = time.perf_counter()
    outcome = memory.system().scrub(apply=not config.dry_run)
    plan = outcome.plan
    by_kind = dict(sorted(plan.by_kind.items()))
    context.log.info(
        f"scrub ({'dry run' if config.dry_run else 'applied'}): {sum(by_kind.values())} found"
    )
    rows = [f"| {f.kind} | {f.place} | {f.count} |" for f in plan.findings[:SCRUB_PLACES_SHOWN]]
    table = "| kind | where | times |\n|---|---|---|\n" + "\n".join(rows)
    return dg.MaterializeResult(
        metadata={
            "dry_run": config.dry_run,
            "found": sum(by_kind.values()),
            "places": len(plan.findings),
            **{f"found_{kind.replace('-', '_')}": n for kind, n in by_kind.items()},
            "by_kind": dg.MetadataValue.json(by_kind),
            "changes": dg.MetadataValue.json(plan.places),
            "where": dg.MetadataValue.md(table if rows else "_nothing found_"),
            "purged": dg.MetadataValue.md("\n".join(f"- {p}" for p in outcome.purged) or "_no_"),
            "seconds": round(time.perf_counter() - started, 3),
        }
    )


ASSETS = [forgetting_candidates, scrub_report]
