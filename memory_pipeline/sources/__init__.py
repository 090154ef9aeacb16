"""Source roots and conversation exports: what feeds the memory, and how it stands.

Plain library code (no Dagster): the pipeline's sensors and assets, and the
``memory-pipeline sources`` commands, are thin adapters over it.
"""

from memory_pipeline.sources.ledger import Ledger, open_ledger, read_ledger
from memory_pipeline.sources.sources_file import SourceKind, SourceRoot, SourcesConfig, load_sources
from memory_pipeline.sources.status import FileState, FileStatus, SourceFile, scan, sources_status
from memory_pipeline.sources.sync import SyncPlan, SyncReport, apply_sync, plan_sync

__all__ = [
    "FileState",
    "FileStatus",
    "Ledger",
    "SourceFile",
    "SourceKind",
    "SourceRoot",
    "SourcesConfig",
    "SyncPlan",
    "SyncReport",
    "apply_sync",
    "load_sources",
    "open_ledger",
    "plan_sync",
    "read_ledger",
    "scan",
    "sources_status",
]
