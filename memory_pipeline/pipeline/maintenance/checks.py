"""Asset checks of the maintenance assets.

* ``no_stored_secret`` (scrub_report, ERROR): a dry-run scrub finds no secret and no
  ``<private>`` span in what the memory holds; fails with the counts by kind (never a
  value) and what to run. It runs after each scrub and in the ``health_checks`` job.
"""

import dagster as dg

from memory_pipeline.pipeline.alerts import FAILING_ITEMS
from memory_pipeline.pipeline.maintenance.assets import scrub_report
from memory_pipeline.pipeline.resources import MemoryResource


@dg.asset_check(
    asset=scrub_report,
    description="A dry-run scrub finds no secret or <private> span in the memory's chunks, "
    "documents, handed records and archive; fails with the counts by kind.",
)
def no_stored_secret(memory: MemoryResource) -> dg.AssetCheckResult:
    plan = memory.system().scrub(apply=False).plan
    by_kind = dict(sorted(plan.by_kind.items()))
    found = sum(by_kind.values())
    said = ", ".join(f"{kind} {n}" for kind, n in by_kind.items())
    return dg.AssetCheckResult(
        passed=not found,
        severity=dg.AssetCheckSeverity.ERROR,
        description=(
            f"{found} found in {len(plan.findings)} places ({said}): launch the scrub job "
            "with dry_run: false, or run memory-pipeline scrub --apply"
            if found
            else "no secret or private span is stored"
        ),
        metadata={
            "found": found,
            "by_kind": dg.MetadataValue.json(by_kind),
            FAILING_ITEMS: dg.MetadataValue.json(list(by_kind)),
        },
    )


CHECKS = [no_stored_secret]
