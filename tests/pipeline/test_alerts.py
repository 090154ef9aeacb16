"""Alerts: failed checks and runs reach a real webhook and the alert log once per change.

A real ``ThreadingHTTPServer`` on 127.0.0.1 records every POST; a real Dagster instance
runs a small job whose check and asset fail on demand; the sensor is ticked by hand,
each tick fed the cursor of the one before.
"""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from memory_pipeline.alerts import Alert, AlertLog, alert_log_path, deliver
from memory_pipeline.cli.main import main
from memory_pipeline.locations import data_dir
from memory_pipeline.pipeline.alerts import (
    FAILING_ITEMS,
    MAX_ATTEMPTS,
    MAX_ITEMS,
    AlertsCursor,
    build_alerts_sensor,
)
from memory_pipeline.pipeline.definitions import build_definitions
from tests.test_pipeline_support import Webhook, make_corpus

UI = "http://ui.test:3000"
CONTROL: dict[str, Any] = {}  # what the check reports and whether the flaky asset raises


@dg.asset
def notes() -> int:
    return 1


@dg.asset_check(asset=notes)
def notes_fresh() -> dg.AssetCheckResult:
    mode = CONTROL["check"]  # pass | error | warn | crash
    if mode == "crash":
        raise RuntimeError("the check itself broke")
    severity = dg.AssetCheckSeverity.WARN if mode == "warn" else dg.AssetCheckSeverity.ERROR
    return dg.AssetCheckResult(
        passed=mode == "pass",
        severity=severity,
        description=f"notes {mode}",
        metadata={FAILING_ITEMS: dg.MetadataValue.json(CONTROL["items"])},
    )


@dg.asset
def flaky() -> int:
    if CONTROL["flaky_fails"]:
        raise RuntimeError("the flaky asset broke")
    return 1


DEFS = dg.Definitions(
    assets=[notes, flaky],
    asset_checks=[notes_fresh],
    jobs=[
        dg.define_asset_job("notes_job", selection=[notes]),
        dg.define_asset_job("flaky_job", selection=[flaky]),
    ],
)


@pytest.fixture(autouse=True)
def control() -> Iterator[None]:
    CONTROL.update(check="pass", flaky_fails=False, items=[])
    yield
    CONTROL.clear()


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


class Sensor:
    """The alerts sensor over DEFS, ticked by hand with the cursor carried along."""

    def __init__(self, instance: dg.DagsterInstance, log: Path, webhook: str | None) -> None:
        self.instance = instance
        self.log = AlertLog(log)
        self.sensor = build_alerts_sensor(log, webhook, UI)
        self.cursor: str | None = None

    def tick(self) -> dg.SensorResult:
        with dg.build_sensor_context(
            instance=self.instance, cursor=self.cursor, repository_def=DEFS.get_repository_def()
        ) as context:
            result = self.sensor(context)
        assert isinstance(result, dg.SensorResult)
        assert not result.run_requests
        self.cursor = result.cursor
        return result

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.path.read_text().splitlines()]

    def alerts(self) -> list[tuple[str, str, str]]:
        return [(a.kind, a.subject, a.state) for a in self.log.read().alerts]


def run(instance: dg.DagsterInstance, job: str) -> dg.ExecuteInProcessResult:
    return DEFS.resolve_job_def(job).execute_in_process(instance=instance, raise_on_error=False)


@pytest.fixture
def sensor(instance: dg.DagsterInstance, tmp_path: Path, webhook: Webhook) -> Sensor:
    return Sensor(instance, tmp_path / "data" / "alerts.jsonl", webhook.url)


def test_a_failing_check_is_delivered_once_and_its_recovery_after(
    sensor: Sensor, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    CONTROL["check"] = "error"
    failed_run = run(instance, "notes_job").run_id
    sensor.tick()
    [posted] = webhook.delivered()
    assert webhook.received[0][1] == "application/json"
    assert posted["alert"]["subject"] == "notes:notes_fresh"
    assert (posted["alert"]["state"], posted["alert"]["severity"]) == ("failed", "ERROR")
    assert posted["alert"]["run_id"] == failed_run
    assert posted["alert"]["url"] == f"{UI}/assets/notes?view=checks&checkDetail=notes_fresh"
    assert posted["text"].startswith("[memory-pipeline] check notes:notes_fresh FAILED (ERROR)")
    [line] = sensor.lines()
    assert (line["state"], line["message"], line["delivered"]) == ("failed", "notes error", True)

    sensor.tick()
    run(instance, "notes_job")  # fails again: the same state, no new alert
    sensor.tick()
    assert len(webhook.delivered()) == 1 and len(sensor.lines()) == 1

    CONTROL["check"] = "pass"
    run(instance, "notes_job")
    sensor.tick()
    sensor.tick()
    assert [b["alert"]["state"] for b in webhook.delivered()] == ["failed", "recovered"]
    assert sensor.alerts() == [
        ("check", "notes:notes_fresh", "failed"),
        ("check", "notes:notes_fresh", "recovered"),
    ]


def test_warn_is_a_warning_and_a_change_to_error_is_announced(
    sensor: Sensor, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    run(instance, "notes_job")
    sensor.tick()  # passing on the first tick: remembered, not announced
    assert webhook.received == [] and not sensor.log.path.exists()
    for mode in ("warn", "error"):
        CONTROL["check"] = mode
        run(instance, "notes_job")
        sensor.tick()
    assert [(b["alert"]["state"], b["alert"]["severity"]) for b in webhook.delivered()] == [
        ("warning", "WARN"),
        ("failed", "ERROR"),
    ]


def test_a_check_that_crashes_counts_as_failed(
    sensor: Sensor, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    CONTROL["check"] = "crash"
    assert not run(instance, "notes_job").success
    sensor.tick()
    assert sorted(sensor.alerts()) == [
        ("check", "notes:notes_fresh", "failed"),
        ("run", "notes_job", "failed"),
    ]
    sensor.tick()
    assert len(webhook.delivered()) == 2


def test_a_failed_run_is_delivered_once_and_the_jobs_next_success_recovers(
    sensor: Sensor, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    run(instance, "flaky_job")
    sensor.tick()  # a succeeding job: nothing to say
    CONTROL["flaky_fails"] = True
    failed = run(instance, "flaky_job")
    assert not failed.success
    sensor.tick()
    [posted] = webhook.delivered()
    alert = posted["alert"]
    assert (alert["kind"], alert["subject"], alert["state"]) == ("run", "flaky_job", "failed")
    assert alert["run_id"] == failed.run_id and alert["url"] == f"{UI}/runs/{failed.run_id}"
    assert "the flaky asset broke" in alert["message"]
    sensor.tick()
    assert len(webhook.delivered()) == 1 and len(sensor.lines()) == 1

    CONTROL["flaky_fails"] = False
    run(instance, "flaky_job")
    sensor.tick()
    run(instance, "flaky_job")  # a second success is no news
    sensor.tick()
    assert sensor.alerts() == [("run", "flaky_job", "failed"), ("run", "flaky_job", "recovered")]
    assert [b["alert"]["state"] for b in webhook.delivered()] == ["failed", "recovered"]


def test_the_first_tick_announces_only_jobs_failing_now(
    sensor: Sensor, instance: dg.DagsterInstance
) -> None:
    CONTROL["flaky_fails"] = True
    run(instance, "flaky_job")
    CONTROL["check"] = "crash"
    run(instance, "notes_job")
    CONTROL.update(check="pass", flaky_fails=False)
    run(instance, "notes_job")  # failed, then fixed before anyone looked
    CONTROL["flaky_fails"] = True
    still_failing = run(instance, "flaky_job").run_id
    sensor.tick()
    [line] = sensor.lines()
    assert (line["subject"], line["state"], line["run_id"]) == (
        "flaky_job",
        "failed",
        still_failing,
    )
    cursor = AlertsCursor.load(sensor.cursor)
    assert cursor.failed_jobs == ["flaky_job"] and cursor.checks == {"notes:notes_fresh": "ok"}


def test_a_webhook_that_is_down_loses_nothing_and_delivers_once_when_back(
    sensor: Sensor, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    webhook.status = 500
    CONTROL["check"] = "error"
    run(instance, "notes_job")
    sensor.tick()  # does not raise
    [line] = sensor.lines()
    assert line["delivered"] is False and "HTTP 500" in line["error"]
    assert "secret-token" not in line["error"]
    sensor.tick()  # still down: tried again, nothing new in the log
    assert len(sensor.lines()) == 1 and len(webhook.received) == 2

    webhook.status = 200
    sensor.tick()
    sensor.tick()
    [posted] = webhook.delivered()
    assert posted["alert"]["state"] == "failed" and posted["alert"]["attempts"] == 2
    [alert] = sensor.log.read().alerts  # the retry's line replaces the first in the listing
    assert (alert.delivered, alert.error, alert.attempts) == (True, "", 3)
    assert AlertsCursor.load(sensor.cursor).outbox == []


def test_a_webhook_down_for_good_is_given_up_after_max_attempts(
    sensor: Sensor, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    webhook.status = 503
    CONTROL["check"] = "warn"
    run(instance, "notes_job")
    for _ in range(MAX_ATTEMPTS + 2):
        sensor.tick()
    assert len(webhook.received) == MAX_ATTEMPTS
    [alert] = sensor.log.read().alerts
    assert alert.delivered is False and alert.error.startswith(f"given up after {MAX_ATTEMPTS}")
    assert AlertsCursor.load(sensor.cursor).outbox == []


def test_without_a_webhook_alerts_are_only_logged(
    instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    sensor = Sensor(instance, tmp_path / "alerts.jsonl", None)
    CONTROL["check"] = "error"
    run(instance, "notes_job")
    sensor.tick()
    [line] = sensor.lines()
    assert (line["state"], line["delivered"], line["attempts"]) == ("failed", None, 0)


def test_the_cli_lists_the_alerts_and_their_json(
    sensor: Sensor, instance: dg.DagsterInstance, capsys: pytest.CaptureFixture[str]
) -> None:
    log = str(sensor.log.path)
    assert main(["alerts", "--log", log]) == 0
    assert capsys.readouterr().out == f"alert log: {log}\nno alerts yet\n"
    CONTROL.update(check="error", flaky_fails=True)
    run(instance, "notes_job")
    run(instance, "flaky_job")
    sensor.tick()
    CONTROL.update(check="pass", flaky_fails=False)
    run(instance, "notes_job")
    sensor.tick()

    assert main(["alerts", "--log", log]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"alert log: {log}"
    assert out[1].split() == ["time", "kind", "subject", "state", "message", "delivered"]
    rows = [line.split()[1:4] for line in out[2:]]
    assert rows == [  # in a tick, checks come before runs
        ["check", "notes:notes_fresh", "failed"],
        ["run", "flaky_job", "failed"],
        ["check", "notes:notes_fresh", "recovered"],
    ]
    assert all(line.rstrip().endswith("yes") for line in out[2:])

    assert main(["alerts", "--log", log, "--json", "--limit", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["log"] == log and data["unreadable_lines"] == 0
    assert [(a["subject"], a["state"]) for a in data["alerts"]] == [
        ("flaky_job", "failed"),
        ("notes:notes_fresh", "recovered"),
    ]


def test_the_log_skips_unreadable_lines_and_counts_them(tmp_path: Path) -> None:
    log = AlertLog(tmp_path / "alerts.jsonl")
    log.append(Alert("run", "ingest_sources", "failed", "ERROR", "boom"))
    with log.path.open("a") as out:
        out.write('{"kind": "run", "subj\n[1, 2]\n')  # a torn line, a foreign one
    log.append(Alert("run", "ingest_sources", "recovered", "INFO", "fine"))
    listing = log.read()
    assert [a.state for a in listing.alerts] == ["failed", "recovered"]
    assert listing.unreadable == 2
    assert [a.state for a in log.read(limit=1).alerts] == ["recovered"]


def test_a_webhook_nobody_listens_on_is_an_error_text_without_the_url() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/hooks/secret-token"
    error = deliver(url, Alert("run", "job", "failed", "ERROR", "x"), timeout=2.0)
    assert error is not None and error.startswith("webhook unreachable")
    assert "secret-token" not in error
    assert deliver("file:///etc/passwd", Alert("run", "j", "failed", "ERROR", "x")) is not None


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),  # beside the default index, in the user's data folder
        ({"HYBRID_RAG_INDEX_PATH": "data/indices"}, Path("data/alerts.jsonl")),
        (
            {"HYBRID_RAG_INDEX_PATH": "data/indices", "MEMORY_PIPELINE_ALERT_LOG": "/var/a.jsonl"},
            Path("/var/a.jsonl"),
        ),
    ],
)
def test_the_alert_log_lives_beside_the_index_unless_named(
    env: dict[str, str], expected: Path | None
) -> None:
    assert alert_log_path(env) == (expected or data_dir() / "alerts.jsonl")


def test_the_pipeline_registers_the_sensor_without_showing_the_webhook(tmp_path: Path) -> None:
    secret = "https://hooks.example.com/services/T000/B000/secret-token"
    corpus = make_corpus(tmp_path)
    defs = build_definitions(corpus.env(MEMORY_PIPELINE_ALERT_WEBHOOK=secret))
    sensor = defs.resolve_sensor_def("alerts_sensor")
    assert sensor.default_status is dg.DefaultSensorStatus.RUNNING
    assert sensor.minimum_interval_seconds == 30 and not sensor.targets
    index = Path(corpus.env()["HYBRID_RAG_INDEX_PATH"])
    assert str(index.parent / "alerts.jsonl") in (sensor.description or "")
    assert "a webhook is configured" in (sensor.description or "")
    assert "secret-token" not in (sensor.description or "") + repr(sensor.metadata)


class Pipeline:
    """The real definitions over a real corpus: the source sensor and the alerts sensor
    ticked by hand, each run the source sensor asks for executed as the daemon would."""

    def __init__(self, instance: dg.DagsterInstance, tmp_path: Path, webhook: Webhook) -> None:
        from memory_pipeline.alerts import LOG_ENV, WEBHOOK_ENV

        self.instance = instance
        self.corpus = make_corpus(tmp_path, conversations=False)
        self.log = AlertLog(tmp_path / "alerts.jsonl")
        env = {LOG_ENV: str(self.log.path), WEBHOOK_ENV: webhook.url}
        self.defs = build_definitions(self.corpus.env(**env))
        self.cursors: dict[str, str | None] = {}

    def tick(self, name: str) -> dg.SensorResult | dg.SkipReason:
        sensor = self.defs.resolve_sensor_def(name)
        with dg.build_sensor_context(
            instance=self.instance,
            cursor=self.cursors.get(name),
            resources=dict(self.defs.resources or {}),
            repository_def=self.defs.get_repository_def(),
        ) as context:
            result = sensor(context)
        assert isinstance(result, dg.SensorResult | dg.SkipReason)
        if isinstance(result, dg.SensorResult):
            self.cursors[name] = result.cursor
        return result

    def sync(self) -> list[dg.ExecuteInProcessResult]:
        """One source sensor tick and the runs it asks for."""
        result = self.tick("source_files_sensor")
        requests = result.run_requests or [] if isinstance(result, dg.SensorResult) else []
        job = self.defs.resolve_job_def("ingest_sources")
        return [
            job.execute_in_process(
                run_config=r.run_config, instance=self.instance, tags=r.tags, raise_on_error=False
            )
            for r in requests
        ]

    def alerts(self) -> list[tuple[str, str, str, str]]:
        self.tick("alerts_sensor")
        return [(a.subject, a.state, a.severity, a.message) for a in self.log.read().alerts]


def test_a_bad_source_file_fails_its_checks_and_deleting_it_recovers_them(
    instance: dg.DagsterInstance, tmp_path: Path, webhook: Webhook
) -> None:
    pipeline = Pipeline(instance, tmp_path, webhook)
    bad = pipeline.corpus.notes / "empty.md"
    bad.write_text("", encoding="utf-8")
    assert [r.success for r in pipeline.sync()] == [True]
    # One bad file, one alert at one severity: sources_parse owns refused files.
    failing = ("documents:sources_parse", "warning", "WARN", "1 source file failed: empty.md")
    assert pipeline.alerts() == [failing]

    bad.unlink()
    assert [r.success for r in pipeline.sync()] == [True]  # the checks are run again
    recovered = ("documents:sources_parse", "recovered", "INFO", "every source file parsed")
    assert pipeline.alerts() == [failing, recovered]
    assert [b["alert"]["state"] for b in webhook.delivered()] == ["warning", "recovered"]


def test_a_third_bad_file_is_one_new_alert_naming_it_and_the_recovery_is_one(
    instance: dg.DagsterInstance, tmp_path: Path, webhook: Webhook
) -> None:
    pipeline = Pipeline(instance, tmp_path, webhook)
    bad = [pipeline.corpus.notes / f"empty-{n}.md" for n in (1, 2, 3)]
    for path in bad[:2]:
        path.write_text("", encoding="utf-8")
    assert [r.success for r in pipeline.sync()] == [True]
    [first] = pipeline.alerts()
    assert first[:2] == ("documents:sources_parse", "warning")

    bad[2].write_text("", encoding="utf-8")
    assert [r.success for r in pipeline.sync()] == [True]
    pipeline.alerts()
    [_, third] = pipeline.alerts()  # a second tick: no more alerts
    subject, state, severity, message = third
    assert (subject, state, severity) == ("documents:sources_parse", "warning", "WARN")
    assert message.startswith(f"new: {bad[2]}; 3 source files failed: empty-1.md")

    for path in bad:
        path.unlink()
    assert [r.success for r in pipeline.sync()] == [True]
    pipeline.alerts()
    assert [a[1] for a in pipeline.alerts()] == ["warning", "warning", "recovered"]


def test_a_check_whose_failing_items_grow_alerts_once_per_growth(
    sensor: Sensor, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    CONTROL.update(check="error", items=["a.md", "b.md"])
    run(instance, "notes_job")
    sensor.tick()
    run(instance, "notes_job")  # the same items again: no alert
    sensor.tick()
    CONTROL["items"] = ["a.md", "b.md", "c.md"]
    run(instance, "notes_job")
    sensor.tick()
    sensor.tick()
    CONTROL["items"] = ["c.md"]  # some recover, the check still fails: no alert
    run(instance, "notes_job")
    sensor.tick()
    CONTROL["items"] = ["a.md", "c.md"]  # a.md is back: new again
    run(instance, "notes_job")
    sensor.tick()
    CONTROL.update(check="pass", items=[])
    run(instance, "notes_job")
    sensor.tick()
    sensor.tick()
    assert [(a["alert"]["state"], a["alert"]["message"]) for a in webhook.delivered()] == [
        ("failed", "notes error"),
        ("failed", "new: c.md; notes error"),
        ("failed", "new: a.md; notes error"),
        ("recovered", "notes pass"),
    ]


def test_the_cursor_keeps_at_most_max_items_per_check_and_an_old_cursor_loads(
    sensor: Sensor, instance: dg.DagsterInstance, webhook: Webhook
) -> None:
    old = json.dumps({"checks": {"notes:notes_fresh": "failed"}, "runs": {}, "outbox": []})
    sensor.cursor = old  # the format before failing items were remembered
    many = [f"f{n:04}.md" for n in range(MAX_ITEMS * 3)]
    CONTROL.update(check="error", items=many)
    run(instance, "notes_job")
    sensor.tick()  # failing before and now: its items are learnt, not announced
    sensor.tick()
    assert webhook.delivered() == []
    cursor = AlertsCursor.load(sensor.cursor)
    assert cursor.checks == {"notes:notes_fresh": "failed"}
    assert len(cursor.items["notes:notes_fresh"].names) == MAX_ITEMS
    CONTROL["items"] = [*many, "zz.md"]
    run(instance, "notes_job")
    sensor.tick()
    sensor.tick()
    [posted] = webhook.delivered()  # past MAX_ITEMS, forgotten names count as new
    more = len(many) - MAX_ITEMS + 1 - 5
    assert posted["alert"]["message"].startswith(f"new: f{MAX_ITEMS:04}.md, ")
    assert posted["alert"]["message"].endswith(f" and {more} more; notes error")
    assert len(AlertsCursor.load(sensor.cursor).items["notes:notes_fresh"].names) == MAX_ITEMS


@dataclass(frozen=True)
class WorkerDeath:
    name: str
    exit_code: int | None  # the code server saw the worker exit with this (None: it did not)
    monitor: str | None  # the run monitor's health finding that failed the run, if it did
    retry: str  # "launched" (by the retry daemon) | "will" (the job allows one) | "none"
    expected: str  # the alert's message; {retry} is the retry run's short id


WORKER_DEATHS = [
    WorkerDeath(
        "killed, retried",
        -signal.SIGKILL,
        None,
        "launched",
        "the run's worker process died (killed by signal 9, SIGKILL); retried as run {retry}",
    ),
    WorkerDeath(
        "exited, retry to come",
        3,
        None,
        "will",
        "the run's worker process died (exit code 3); Dagster will retry it",
    ),
    WorkerDeath(
        "found dead by the monitor, not retried",
        None,
        "run worker (pid 4242) is gone",
        "none",
        "the run's worker process died (run worker (pid 4242) is gone)",
    ),
]


@pytest.mark.parametrize("case", WORKER_DEATHS, ids=lambda c: c.name)
def test_a_run_whose_worker_died_says_so_and_names_its_retry(
    case: WorkerDeath, tmp_path: Path, webhook: Webhook
) -> None:
    """The events Dagster itself writes (its own functions and messages) when a run's
    worker dies, on an instance with run retries on (as ``make run``'s: Dagster tags the
    failed run ``dagster/will_retry``); the retry daemon's part is the tag it adds."""
    from dagster._core.launcher.base import CheckRunHealthResult, WorkerStatus
    from dagster._utils import get_run_crash_explanation

    retries = {"run_retries": {"enabled": True, "max_retries": 0}}
    with dg.instance_for_test(overrides=retries) as instance:
        sensor = Sensor(instance, tmp_path / "alerts.jsonl", webhook.url)
        run(instance, "flaky_job")
        sensor.tick()
        job = DEFS.resolve_job_def("flaky_job")
        tags = {"dagster/max_retries": "1"} if case.retry != "none" else {}
        failed = instance.create_run_for_job(job, status=dg.DagsterRunStatus.STARTED, tags=tags)
        if case.exit_code is not None:  # the code server: the exit, then a failure from outside
            instance.report_engine_event(
                get_run_crash_explanation(
                    prefix=f"Run execution process for {failed.run_id}", exit_code=case.exit_code
                ),
                failed,
            )
            instance.report_run_failed(failed)
        else:  # the run monitor, after the launcher's health check
            health = CheckRunHealthResult(WorkerStatus.FAILED, case.monitor)
            instance.report_run_failed(
                failed,
                f"Detected run worker status {health}. Marking run {failed.run_id} as failed.",
            )
        marked = instance.get_run_by_id(failed.run_id)
        assert marked is not None
        assert marked.tags["dagster/will_retry"] == str(case.retry != "none").lower()
        retry_id = ""
        if case.retry == "launched":
            retry = instance.create_run_for_job(
                job, tags={"dagster/parent_run_id": failed.run_id, "dagster/retry_number": "1"}
            )
            retry_id = retry.run_id
            instance.add_run_tags(failed.run_id, {"dagster/auto_retry_run_id": retry_id})
        sensor.tick()
    [posted] = webhook.delivered()
    assert (posted["alert"]["state"], posted["alert"]["run_id"]) == ("failed", failed.run_id)
    assert posted["alert"]["message"] == case.expected.format(retry=retry_id[:8])
    assert "outside the execution context" not in posted["text"]
