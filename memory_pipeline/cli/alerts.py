"""`memory-pipeline alerts`: what the Dagster alerts sensor announced, read from its log.

The sensor (memory_pipeline/pipeline/alerts.py) appends one line per change of state —
a check failing or recovering, a run failing, its job recovering — to the alert log;
this command lists it, newest last, without starting Dagster.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from memory_pipeline.alerts import (
    LOG_ENV,
    LOG_NAME,
    Alert,
    AlertLog,
    alert_log_path,
    default_log_path,
)
from memory_pipeline.cli.flags import positive_int, shown
from memory_pipeline.config import Settings, variable
from memory_pipeline.locations import checkout_alerts_notice

DEFAULT_LIMIT = 50
_COLUMNS = ("time", "kind", "subject", "state", "message", "delivered")
_MESSAGE_WIDTH = 70


def _delivered(alert: Alert) -> str:
    if alert.delivered is None:
        return "-"  # no webhook configured: the log is the only place
    if alert.delivered:
        return "yes"
    return f"no ({alert.error})" if alert.error else "no"


def _row(alert: Alert) -> tuple[str, ...]:
    message = " ".join(alert.message.split())
    if len(message) > _MESSAGE_WIDTH:
        message = message[: _MESSAGE_WIDTH - 1] + "…"
    return (alert.at, alert.kind, alert.subject, alert.state, message, _delivered(alert))


def render(alerts: list[Alert]) -> str:
    """A plain-text table, one alert per row, columns as wide as their widest cell."""
    rows = [_COLUMNS, *(_row(a) for a in alerts)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def cmd_alerts(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    if getattr(args, "index", None):  # --index moves the default log with the index
        env[variable("index_path")] = args.index
    path = Path(args.log) if args.log else alert_log_path(env)
    if not (args.log or env.get(LOG_ENV) or env.get(variable("index_path"))):
        notice = checkout_alerts_notice(Path.cwd(), path)
        if notice:
            print(notice, file=sys.stderr)
    listing = AlertLog(path).read(limit=args.limit)
    if args.json:
        payload = {
            "log": str(path),
            "alerts": [a.to_dict() for a in listing.alerts],
            "unreadable_lines": listing.unreadable,
        }
        print(json.dumps(payload, ensure_ascii=False, indent=2))
        return 0
    print(f"alert log: {path}")
    if listing.alerts:
        print(render(listing.alerts))
    else:
        print("no alerts yet")
    if listing.unreadable:
        print(f"{listing.unreadable} unreadable lines skipped", file=sys.stderr)
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    parents: list[argparse.ArgumentParser],
) -> None:
    """Add the ``alerts`` subcommand (it reads only the log: no store, no model)."""
    p = sub.add_parser(
        "alerts",
        parents=parents,
        help="list the alerts the Dagster alerts sensor sent (failed checks and runs, recoveries)",
        description="List the alert log, newest last: every failed or recovered asset check "
        "and every failed or recovered run the alerts sensor announced, and whether the "
        "webhook (MEMORY_PIPELINE_ALERT_WEBHOOK) took it.",
        epilog=f"The log is {LOG_ENV} when set, else alerts.jsonl beside the index folder "
        "(--index or HYBRID_RAG_INDEX_PATH; `make run` uses data/alerts.jsonl).",
    )
    p.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help="show the last N alerts (default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--log",
        metavar="PATH",
        help=f"the alert log to read (default: {LOG_ENV}, else {LOG_NAME} beside the index "
        f"folder: {shown(default_log_path(Settings().index_path))} unless --index or "
        f"{variable('index_path')} is set)",
    )
    p.set_defaults(func=cmd_alerts)
