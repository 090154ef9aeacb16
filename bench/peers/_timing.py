"""What every driver prints: model load and ingest, each timed in its own process.

Standard library only: the peers' drivers import it with the peers' python.
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Callable
from typing import Any


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(step: Callable[[], Any]) -> tuple[Any, float, float]:
    """``step()``'s result, wall seconds and CPU seconds."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = step()
    return result, time.perf_counter() - wall, cpu_seconds() - cpu


def report(load: tuple[float, float], ingest: tuple[float, float], **extra: Any) -> None:
    """The driver's one JSON line, the last thing it prints."""
    line = {"load_s": load[0], "load_cpu_s": load[1], "ingest_s": ingest[0]}
    line |= {"ingest_cpu_s": ingest[1], **extra}
    print(json.dumps(line), flush=True)
