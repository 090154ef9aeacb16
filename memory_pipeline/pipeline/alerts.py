"""The alerts sensor: failed asset checks and runs reach people who are not watching the UI.

Each tick reads the latest execution of every asset check and the runs that finished
since the last tick, compares them with the state kept in the cursor, and makes one
alert per *change*: a check that starts failing (``failed`` for ERROR, ``warning`` for
WARN) or passes again (``recovered``), a failed run, and a job whose next run succeeds
after a failure (``recovered``). A check failing again with the same failing items is
one alert, not one per tick; a failing check whose items (``FAILING_ITEMS`` in its
result metadata: the files or findings that fail) include one it did not have before
alerts again, naming what is new. Items that recover while others still fail are not
announced; the check's recovery is, once. The first tick (empty cursor) announces what
is failing already — someone must hear of it — and only remembers what passes.

Alerts go to the alert log (``memory_pipeline.alerts``) and, when configured, to a
webhook. A webhook that is down never fails the tick: the alert is logged with
``delivered=false`` and waits in an outbox in the cursor (at most ``MAX_OUTBOX``) for
later ticks, up to ``MAX_ATTEMPTS`` tries. After the first failed delivery of a tick
the rest wait for the next tick, so one slow webhook costs one timeout, not one each.

The sensor requests no runs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode

import dagster as dg

from memory_pipeline.alerts import (
    CHECK,
    FAILED,
    RECOVERED,
    RUN,
    WARNING,
    WEBHOOK_ENV,
    Alert,
    AlertLog,
    deliver,
)

if TYPE_CHECKING:
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecord

INTERVAL_SECONDS = 30
FAILING_ITEMS = "failing_items"  # a check's metadata: JSON list of what fails, by name
MAX_ITEMS = 100  # item names remembered per check; a digest of them all tells sameness
NEW_SHOWN = 5  # new items named in an alert's message
MAX_OUTBOX = 50
MAX_ATTEMPTS = 5
MAX_SEEN_RUNS = 100  # run ids remembered against double counting at the watermark
FIRST_LOOK_RUNS = 100  # the first tick judges each job by its latest of these runs
RUNS_PER_TICK = 500  # the rest are taken on the next tick (the watermark only advances)
OVERLAP_SECONDS = 1.0  # re-read this much before the watermark: equal timestamps commit late
OK = "ok"
FINISHED = [dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.SUCCESS]


def _digest(items: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(set(items))).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SeenItems:
    """A failing check's items at its last result: the first ``MAX_ITEMS`` names, and a
    digest of them all (so a long list that did not change is not news)."""

    names: list[str]
    digest: str

    @classmethod
    def of(cls, items: list[str]) -> SeenItems:
        return cls(list(dict.fromkeys(items))[:MAX_ITEMS], _digest(items))

    def new(self, items: list[str]) -> list[str]:
        """Items not seen before (past ``MAX_ITEMS``, forgotten ones count as new)."""
        if _digest(items) == self.digest:
            return []
        known = set(self.names)
        return [i for i in dict.fromkeys(items) if i not in known]


@dataclass
class AlertsCursor:
    """What the sensor remembers between ticks; every part of it is bounded."""

    checks: dict[str, str] = field(default_factory=dict)  # subject -> OK | FAILED | WARNING
    items: dict[str, SeenItems] = field(default_factory=dict)  # failing subject -> its items
    runs_since: float | None = None  # update time of the newest finished run seen; None: never
    seen_runs: list[str] = field(default_factory=list)  # the last MAX_SEEN_RUNS handled
    failed_jobs: list[str] = field(default_factory=list)  # jobs whose last finished run failed
    outbox: list[Alert] = field(default_factory=list)  # alerts the webhook has not taken yet

    @classmethod
    def load(cls, raw: str | None) -> AlertsCursor:
        """The cursor, or a fresh one when it is missing or unreadable (alerts start over)."""
        try:
            data = json.loads(raw) if raw else {}
            runs = data.get("runs", {})
            since = runs.get("since")
            return cls(
                checks={str(k): str(v) for k, v in data.get("checks", {}).items()},
                items={  # absent from cursors written before items were remembered
                    str(k): SeenItems([str(n) for n in v["names"]], str(v["digest"]))
                    for k, v in data.get("items", {}).items()
                },
                runs_since=None if since is None else float(since),
                seen_runs=[str(r) for r in runs.get("seen", [])],
                failed_jobs=[str(j) for j in runs.get("failed_jobs", [])],
                outbox=[Alert.from_dict(a) for a in data.get("outbox", [])],
            )
        except (ValueError, TypeError, AttributeError, KeyError):
            return cls()

    def dump(self) -> str:
        return json.dumps(
            {
                "checks": self.checks,
                "items": {
                    k: {"names": v.names[:MAX_ITEMS], "digest": v.digest}
                    for k, v in self.items.items()
                },
                "runs": {
                    "since": self.runs_since,
                    "seen": self.seen_runs[-MAX_SEEN_RUNS:],
                    "failed_jobs": sorted(self.failed_jobs),
                },
                "outbox": [a.to_dict() for a in self.outbox],
            },
            sort_keys=True,
        )


@dataclass(frozen=True)
class _Observed:
    state: str  # OK | FAILED | WARNING
    severity: str
    message: str
    items: list[str] = field(default_factory=list)  # what fails, when the check names it


def _failing_items(evaluation: dg.AssetCheckEvaluation) -> list[str]:
    """The check's own list of what fails (``FAILING_ITEMS``); [] when it keeps none."""
    entry = evaluation.metadata.get(FAILING_ITEMS)
    value = entry.value if entry is not None else None
    return [str(i) for i in value] if isinstance(value, list) else []


def _observe(instance: dg.DagsterInstance, record: AssetCheckExecutionRecord) -> _Observed | None:
    """A check's latest execution as a state; None while it runs or when it was skipped."""
    evaluation = record.evaluation
    if isinstance(evaluation, dg.AssetCheckEvaluation):
        if evaluation.passed:
            return _Observed(OK, evaluation.severity.value, evaluation.description or "")
        state = WARNING if evaluation.severity == dg.AssetCheckSeverity.WARN else FAILED
        message = evaluation.description or "the check failed"
        return _Observed(state, evaluation.severity.value, message, _failing_items(evaluation))
    # Planned only: still running, skipped, or its run died before the check reported.
    run = instance.get_run_by_id(record.run_id)
    if run is None or not run.is_finished or run.status != dg.DagsterRunStatus.FAILURE:
        return None
    return _Observed(FAILED, "ERROR", "the check did not finish: its run failed")


def _check_url(ui_url: str, key: dg.AssetCheckKey) -> str:
    path = "/".join(quote(part, safe="") for part in key.asset_key.path)
    return f"{ui_url}/assets/{path}?{urlencode({'view': 'checks', 'checkDetail': key.name})}"


def check_alerts(
    context: dg.SensorEvaluationContext, cursor: AlertsCursor, ui_url: str
) -> list[Alert]:
    """Alerts for checks whose state changed since the cursor; updates ``cursor.checks``."""
    repository = context.repository_def
    if repository is None:
        context.log.warning("no repository definition: asset checks are not watched")
        return []
    keys = sorted(repository.asset_graph.asset_check_keys, key=str)
    latest = context.instance.event_log_storage.get_latest_asset_check_execution_by_key(keys)
    states: dict[str, str] = {}
    items: dict[str, SeenItems] = {}
    alerts: list[Alert] = []
    for key in keys:
        subject = f"{key.asset_key.to_user_string()}:{key.name}"
        before = cursor.checks.get(subject)
        seen = cursor.items.get(subject)
        record = latest.get(key)
        now = _observe(context.instance, record) if record is not None else None
        if record is None or now is None:  # nothing new to judge by: keep what was known
            if before is not None:
                states[subject] = before
            if seen is not None:
                items[subject] = seen
            continue
        states[subject] = now.state
        if now.state != OK:
            items[subject] = SeenItems.of(now.items)
        message = _news(before, seen, now)
        if message is None:
            continue
        state = RECOVERED if now.state == OK else now.state
        alerts.append(
            Alert(
                kind=CHECK,
                subject=subject,
                state=state,
                severity="INFO" if state == RECOVERED else now.severity,
                message=message,
                run_id=record.run_id,
                url=_check_url(ui_url, key),
            )
        )
    cursor.checks = states  # checks no longer defined are forgotten
    cursor.items = items
    return alerts


def _news(before: str | None, seen: SeenItems | None, now: _Observed) -> str | None:
    """The alert's message when the check's latest result is news, else None."""
    if now.state == OK:
        return None if before in (None, OK) else now.message or "the check passes again"
    if now.state != before:
        return now.message
    if seen is None:  # remembered by a cursor without items: learn them quietly
        return None
    new = seen.new(now.items)
    if not new:
        return None
    more = f" and {len(new) - NEW_SHOWN} more" if len(new) > NEW_SHOWN else ""
    return f"new: {', '.join(new[:NEW_SHOWN])}{more}; {now.message}"


# What Dagster writes when a run's worker process dies: the code server's note of the
# exit (then a run failure "marked as failed from outside the execution context"), or
# the run monitor's failure after the launcher's health check (launcher.py).
_WORKER_EXIT = re.compile(
    r"Run execution process for \S+ (?:was terminated by signal (\d+) \((\w+)\)"
    r"|unexpectedly exited with code (-?\d+))"
)
_WORKER_FAILED = re.compile(r"Detected run worker status FAILED: '(.+?)'")
# Dagster's run retry tags: on the failed run, the retry it launched / whether one will be.
AUTO_RETRY_RUN_ID_TAG = "dagster/auto_retry_run_id"
WILL_RETRY_TAG = "dagster/will_retry"


def _worker_death(messages: list[str]) -> str | None:
    """How the run's worker died ("killed by signal 9, SIGKILL", "exit code 3", or what
    the health check found), when that is why the run failed."""
    for message in messages:
        if found := _WORKER_EXIT.match(message):
            signum, name, code = found.groups()
            return f"killed by signal {signum}, {name}" if signum else f"exit code {code}"
        if found := _WORKER_FAILED.match(message):
            return found.group(1)
    return None


def _retry_note(run: dg.DagsterRun) -> str:
    retry = run.tags.get(AUTO_RETRY_RUN_ID_TAG)
    if retry:
        return f"; retried as run {retry[:8]}"
    if run.tags.get(WILL_RETRY_TAG) == "true":
        return "; Dagster will retry it"
    return ""


def _failure_message(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """The first failed step's error, else how the run's worker died, else the run's
    failure message, in one line; and the retry Dagster launched, if it did."""
    kinds = {
        dg.DagsterEventType.STEP_FAILURE,
        dg.DagsterEventType.RUN_FAILURE,
        dg.DagsterEventType.ENGINE_EVENT,
    }
    events = [
        e.dagster_event for e in instance.all_logs(run.run_id, of_type=kinds) if e.dagster_event
    ]
    for event in events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            while error.cause is not None:  # Dagster wraps the user's exception; show it
                error = error.cause
            first = (error.message.strip().splitlines() or [""])[0]
            return f"step {event.step_key} failed: {first}" + _retry_note(run)
    death = _worker_death([(e.message or "").strip() for e in events])
    if death is not None:
        return f"the run's worker process died ({death})" + _retry_note(run)
    for event in events:
        if event.event_type is not dg.DagsterEventType.ENGINE_EVENT and event.message:
            return event.message.strip().splitlines()[0] + _retry_note(run)
    return "run failed" + _retry_note(run)


def run_alerts(instance: dg.DagsterInstance, cursor: AlertsCursor, ui_url: str) -> list[Alert]:
    """Alerts for runs finished since the cursor's watermark; advances the cursor."""
    first_look = cursor.runs_since is None
    if first_look:
        newest = instance.get_run_records(
            filters=dg.RunsFilter(statuses=FINISHED),
            limit=FIRST_LOOK_RUNS,
            order_by="update_timestamp",
        )
        records = list(reversed(newest))
    else:
        since = float(cursor.runs_since or 0.0) - OVERLAP_SECONDS
        records = list(
            instance.get_run_records(
                filters=dg.RunsFilter(
                    statuses=FINISHED,
                    updated_after=dt.datetime.fromtimestamp(max(since, 0.0), dt.UTC),
                ),
                limit=RUNS_PER_TICK,
                order_by="update_timestamp",
                ascending=True,
            )
        )
    seen = set(cursor.seen_runs)
    failed_jobs = set(cursor.failed_jobs)
    watermark = cursor.runs_since or 0.0
    latest: dict[str, dg.RunRecord] = {}  # first look: each job's latest finished run
    alerts: list[Alert] = []
    for record in records:
        run = record.dagster_run
        updated = record.update_timestamp.timestamp()
        watermark = max(watermark, updated)
        if run.run_id in seen:
            continue
        seen.add(run.run_id)
        cursor.seen_runs.append(run.run_id)
        finished = record.end_time if record.end_time is not None else updated
        if not first_look and finished < float(cursor.runs_since or 0.0) - OVERLAP_SECONDS:
            continue  # an old run touched again (a tag added), not a new finish
        if first_look:
            latest[run.job_name] = record
            continue
        alert = _judge(instance, record, failed_jobs, ui_url)
        if alert is not None:
            alerts.append(alert)
    for record in latest.values():  # only what is failing now is worth telling at first
        if record.dagster_run.status == dg.DagsterRunStatus.FAILURE:
            alert = _judge(instance, record, failed_jobs, ui_url)
            alerts.extend([alert] if alert is not None else [])
    cursor.runs_since = watermark
    cursor.seen_runs = cursor.seen_runs[-MAX_SEEN_RUNS:]
    cursor.failed_jobs = sorted(failed_jobs)
    return alerts


def _judge(
    instance: dg.DagsterInstance, record: dg.RunRecord, failed_jobs: set[str], ui_url: str
) -> Alert | None:
    """A failed run's alert, or its job's recovery; ``failed_jobs`` follows along."""
    run = record.dagster_run
    url = f"{ui_url}/runs/{run.run_id}"
    if run.status == dg.DagsterRunStatus.FAILURE:
        failed_jobs.add(run.job_name)
        message = _failure_message(instance, run)
        return Alert(RUN, run.job_name, FAILED, "ERROR", message, run.run_id, url)
    if run.job_name not in failed_jobs:
        return None
    failed_jobs.discard(run.job_name)
    message = f"run {run.run_id[:8]} succeeded after a failed run"
    return Alert(RUN, run.job_name, RECOVERED, "INFO", message, run.run_id, url)


class _Courier:
    """Delivers to the webhook; after one failure it stops trying until the next tick."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.down: str | None = None

    def send(self, alert: Alert) -> Alert:
        if self.url is None:
            return alert
        if self.down is not None:
            return replace(alert, delivered=False, error=f"not tried this tick: {self.down}")
        outcome = alert.outcome(deliver(self.url, alert))
        if not outcome.delivered:
            self.down = outcome.error
        return outcome


def _retry_outbox(
    context: dg.SensorEvaluationContext, log: AlertLog, courier: _Courier, outbox: list[Alert]
) -> list[Alert]:
    """Try the waiting alerts again, oldest first; what still waits is returned."""
    waiting: list[Alert] = []
    for alert in outbox:
        if courier.url is None:
            log.append(replace(alert, error=f"given up: {WEBHOOK_ENV} is no longer set"))
            continue
        sent = courier.send(alert)
        if sent.delivered:
            log.append(sent)
            context.log.info(f"alert delivered after {sent.attempts} attempts: {sent.summary()}")
        elif sent.attempts >= MAX_ATTEMPTS:
            log.append(
                replace(sent, error=f"given up after {sent.attempts} attempts: {sent.error}")
            )
            context.log.warning(f"alert not delivered, given up: {sent.summary()}")
        else:
            waiting.append(sent)
    return waiting


def build_alerts_sensor(
    log_path: Path, webhook_url: str | None, ui_url: str
) -> dg.SensorDefinition:
    """The alerts sensor writing to ``log_path`` and, when set, POSTing to ``webhook_url``."""
    ui_url = ui_url.rstrip("/")
    where = "a webhook is configured" if webhook_url else f"no webhook ({WEBHOOK_ENV} is unset)"

    @dg.sensor(
        name="alerts_sensor",
        minimum_interval_seconds=INTERVAL_SECONDS,
        default_status=dg.DefaultSensorStatus.RUNNING,
        # Never the webhook URL itself: it usually carries its secret token.
        description=f"Failed asset checks (ERROR or WARN) and failed runs → one alert per "
        f"change of state or newly failing item, recoveries too, in {log_path}; {where}.",
    )
    def alerts_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        cursor = AlertsCursor.load(context.cursor)
        log = AlertLog(log_path)
        courier = _Courier(webhook_url)
        outbox = _retry_outbox(context, log, courier, cursor.outbox)
        fresh = [
            *check_alerts(context, cursor, ui_url),
            *run_alerts(context.instance, cursor, ui_url),
        ]
        for alert in fresh:
            sent = courier.send(alert)
            log.append(sent)
            context.log.info(sent.summary())
            if sent.delivered is False:
                outbox.append(sent)
        for dropped in outbox[:-MAX_OUTBOX]:
            log.append(replace(dropped, error=f"given up: over {MAX_OUTBOX} alerts waited"))
        cursor.outbox = outbox[-MAX_OUTBOX:]
        skip = None if fresh else f"no change in {len(cursor.checks)} checks or finished runs"
        return dg.SensorResult(cursor=cursor.dump(), skip_reason=skip)

    return alerts_sensor
