"""Differences between two runs: per metric, per query that got worse, and the regression gate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memory_pipeline.evaluation.results import EvalRun

GATED_METRICS = ("ndcg@10", "recall@10")
_EPS = 1e-9


@dataclass(frozen=True)
class MetricDelta:
    variant: str
    metric: str
    old: float
    new: float

    @property
    def delta(self) -> float:
        return self.new - self.old


@dataclass(frozen=True)
class WorseQuery:
    variant: str
    query_id: str
    query: str
    metric: str
    old: float
    new: float


@dataclass
class Comparison:
    old_label: str
    new_label: str
    deltas: list[MetricDelta] = field(default_factory=list)
    worse: list[WorseQuery] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def render(self, max_queries: int = 20) -> str:
        lines = [f"comparison: {self.old_label} → {self.new_label}"]
        lines += [f"  note: {n}" for n in self.notes]
        current = None
        for d in self.deltas:
            if d.variant != current:
                current = d.variant
                lines.append(f"  [{d.variant}]")
            lines.append(f"    {d.metric:18} {d.old:.4f} → {d.new:.4f}  ({d.delta:+.4f})")
        if self.worse:
            lines.append(f"  queries that got worse ({len(self.worse)}):")
            for w in self.worse[:max_queries]:
                lines.append(
                    f"    [{w.variant}] {w.query_id}: {w.metric} {w.old:.3f} → {w.new:.3f}  "
                    f"{' '.join(w.query.split())[:80]}"
                )
            if len(self.worse) > max_queries:
                lines.append(
                    f"    … and {len(self.worse) - max_queries} more (see the JSON report)"
                )
        else:
            lines.append("  no query got worse")
        return "\n".join(lines)


def compare_runs(old: EvalRun, new: EvalRun) -> Comparison:
    """Per-variant metric deltas, and queries whose headline nDCG dropped."""
    cmp = Comparison(f"{old.dataset} @ {old.created_at}", f"{new.dataset} @ {new.created_at}")
    if old.dataset != new.dataset or old.n_queries != new.n_queries:
        cmp.notes.append(
            f"different query sets ({old.dataset}, {old.n_queries} queries vs "
            f"{new.dataset}, {new.n_queries}): deltas are not like for like"
        )
    old_by_name = {v.name: v for v in old.variants}
    metric = f"ndcg@{new.headline_k}"
    for v in new.variants:
        before = old_by_name.get(v.name)
        if before is None:
            cmp.notes.append(f"variant {v.name} is new in this run")
            continue
        for key in sorted(set(v.summary) & set(before.summary), key=_metric_order):
            cmp.deltas.append(MetricDelta(v.name, key, before.summary[key], v.summary[key]))
        old_q = before.per_query()
        for q in v.queries:
            prev = old_q.get(q.query_id)
            if prev is None:
                continue
            a, b = prev.metrics.get(metric), q.metrics.get(metric)
            if a is not None and b is not None and b < a - _EPS:
                cmp.worse.append(WorseQuery(v.name, q.query_id, q.query, metric, a, b))
    cmp.worse.sort(key=lambda w: (w.variant, w.new - w.old))
    return cmp


def _metric_order(key: str) -> tuple[str, int]:
    name, _, k = key.partition("@")
    return name, int(k) if k.isdigit() else 0


def regression(
    current: EvalRun,
    baseline: EvalRun | Mapping[str, Any],
    margin: float = 0.02,
    *,
    metrics: Sequence[str] = GATED_METRICS,
) -> list[str]:
    """Why ``current`` fails the gate against ``baseline`` (an empty list means it passes).

    A metric fails when it dropped by more than ``margin`` (absolute) from the
    baseline, the last passing run. The baseline is a run, its JSON form, or a flat
    mapping of metric → value. Both sides use their primary (default) variant.
    """
    now = current.variant().summary
    then = _baseline_summary(baseline)
    failures = []
    for m in metrics:
        if m not in then:
            continue  # nothing to compare against: a new metric cannot regress
        if m not in now:
            failures.append(f"{m} was not measured in this run (k values {current.k_values})")
            continue
        drop = then[m] - now[m]
        if drop > margin + _EPS:
            failures.append(
                f"{m} dropped by {drop:.4f} (from {then[m]:.4f} to {now[m]:.4f}), "
                f"more than the allowed {margin:.4f}"
            )
    return failures


def _baseline_summary(baseline: EvalRun | Mapping[str, Any]) -> dict[str, float]:
    if isinstance(baseline, EvalRun):
        return baseline.variant().summary
    if "variants" in baseline:
        return EvalRun.from_dict(dict(baseline)).variant().summary
    return {str(k): float(v) for k, v in baseline.items() if isinstance(v, int | float)}
