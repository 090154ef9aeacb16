"""Alerts for people who are not watching the Dagster UI: an alert log, and a webhook.

The Dagster sensor (``memory_pipeline.pipeline.alerts``) decides *when* something is
worth saying (a check starts failing, a run fails, either recovers); this module only
says it. Every alert is appended to a JSONL log (``memory-pipeline alerts`` lists it)
and, when a webhook is configured, POSTed as JSON with a ``text`` line, which Slack
incoming webhooks and most chat bridges accept as is.

No Dagster here: the CLI imports this module and must start fast.

The log is append-only. A retried delivery appends the same alert (same ``id``) again
with its new outcome, and ``read`` keeps the last word on each id, so the listing shows
one row per alert with whether it finally reached the webhook.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from memory_pipeline.config import DEFAULT_UI_URL, Settings, pipeline_variable

WEBHOOK_ENV = pipeline_variable("alert_webhook")
LOG_ENV = pipeline_variable("alert_log")
UI_URL_ENV = pipeline_variable("ui_url")
__all__ = ["DEFAULT_UI_URL", "LOG_ENV", "UI_URL_ENV", "WEBHOOK_ENV"]
LOG_NAME = "alerts.jsonl"
MAX_MESSAGE = 300  # a chat line, not a traceback; the link leads to the rest

# States. A check is ``failed`` (ERROR severity) or ``warning`` (WARN severity) while it
# fails, ``recovered`` when it passes again; a run is ``failed``, and its job
# ``recovered`` when the job's next finished run succeeds.
FAILED = "failed"
WARNING = "warning"
RECOVERED = "recovered"
CHECK = "check"
RUN = "run"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Alert:
    """One change of state worth telling someone about."""

    kind: str  # CHECK | RUN
    subject: str  # "documents:sources_ingested", or the job's name
    state: str  # FAILED | WARNING | RECOVERED
    severity: str  # "ERROR", "WARN" or "INFO" (a recovery)
    message: str
    run_id: str = ""
    url: str = ""
    at: str = field(default_factory=now_iso)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    delivered: bool | None = None  # None: no webhook configured
    error: str = ""  # why the last delivery failed
    attempts: int = 0  # deliveries tried so far

    def __post_init__(self) -> None:
        if len(self.message) > MAX_MESSAGE:
            object.__setattr__(self, "message", self.message[: MAX_MESSAGE - 1] + "…")

    def summary(self) -> str:
        """The one line a person reads in a chat channel."""
        line = f"[memory-pipeline] {self.kind} {self.subject} {self.state.upper()}"
        if self.state != RECOVERED:
            line += f" ({self.severity})"
        line += f": {self.message}" if self.message else ""
        return f"{line} {self.url}" if self.url else line

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Alert:
        """An alert from a log line or a cursor; unknown keys are ignored (newer writers).

        Raises ValueError or TypeError for anything that is not an alert's object.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"an alert is a JSON object, not {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def outcome(self, error: str | None) -> Alert:
        """This alert after one more delivery attempt (``error`` None: it arrived)."""
        return replace(self, delivered=error is None, error=error or "", attempts=self.attempts + 1)


@dataclass(frozen=True)
class AlertListing:
    """What ``AlertLog.read`` found: the alerts, oldest first, and lines it could not read."""

    alerts: list[Alert]
    unreadable: int = 0


class AlertLog:
    """An append-only JSONL file of alerts, one writer at a time."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def append(self, alert: Alert) -> None:
        """Append one line and fsync it: an alert that was announced must survive a crash."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock  # here: every command imports this module, few append

        line = json.dumps(alert.to_dict(), ensure_ascii=False) + "\n"
        lock = FileLock(str(self.path.with_name(self.path.name + ".lock")), timeout=30.0)
        with lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())

    def read(self, limit: int | None = None) -> AlertListing:
        """The alerts, newest last (the last ``limit`` of them); a bad line is counted, not fatal.

        A line repeating an earlier alert's ``id`` (a retried delivery) replaces it in place.
        """
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return AlertListing([])
        by_id: dict[str, Alert] = {}
        unreadable = 0
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                alert = Alert.from_dict(data)
            except (ValueError, TypeError):  # a torn last line, a hand edit
                unreadable += 1
                continue
            by_id[alert.id] = alert  # dicts keep the first position, take the last value
        alerts = list(by_id.values())
        if limit is not None:
            alerts = alerts[-limit:] if limit > 0 else []
        return AlertListing(alerts, unreadable)


def deliver(url: str, alert: Alert, timeout: float = 5.0) -> str | None:
    """POST ``alert`` to a webhook: None when it answered 2xx, else why not (never raises).

    Error texts never contain the URL: a webhook URL usually holds its secret token.
    """
    import urllib.error  # here: every command imports this module (0.04 s), few deliver
    import urllib.request

    if not url.lower().startswith(("http://", "https://")):
        return "the webhook URL must start with http:// or https://"
    body = json.dumps({"text": alert.summary(), "alert": alert.to_dict()}, ensure_ascii=False)
    request = urllib.request.Request(
        url,
        data=body.encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return f"webhook answered HTTP {exc.code} {exc.reason}"
    except urllib.error.URLError as exc:
        return f"webhook unreachable: {exc.reason}"
    except (OSError, ValueError) as exc:  # timeouts, resets, a malformed URL
        return f"webhook delivery failed: {type(exc).__name__}: {exc}"
    return None if 200 <= status < 300 else f"webhook answered HTTP {status}"


def default_log_path(index_path: Path) -> Path:
    """``alerts.jsonl`` beside the index folder (``data/indices`` → ``data/alerts.jsonl``)."""
    return index_path.parent / LOG_NAME


def resolve_log_path(explicit: str | None, index_path: Path) -> Path:
    return Path(explicit) if explicit else default_log_path(index_path)


def alert_log_path(env: Mapping[str, str]) -> Path:
    """The alert log ``env`` names: ``MEMORY_PIPELINE_ALERT_LOG``, else beside the index."""
    explicit = env.get(LOG_ENV, "").strip() or None
    return resolve_log_path(explicit, Settings.from_env(env).index_path)
