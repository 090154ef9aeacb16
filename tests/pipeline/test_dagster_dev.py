"""`dagster dev` end to end: start it, look through GraphQL, launch the ingest job, stop it.

Slow (a server start is ~15-60 s here): marked ``slow``, run in CI by ``make test``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType

from memory_pipeline.alerts import AlertLog
from memory_pipeline.config import Settings
from memory_pipeline.pipeline.instance import write_instance
from tests.test_pipeline_support import ASSET_KEYS, Corpus, Webhook, make_corpus

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
REPO_SELECTOR = {"repositoryLocationName": "memory_pipeline", "repositoryName": "__repository__"}
START_TIMEOUT = 180
RUN_TIMEOUT = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, port: int, proc: subprocess.Popen[bytes], log: Path, home: Path) -> None:
        self.port = port
        self.proc = proc
        self.log = log
        self.home = home

    def graphql(self, query: str, **variables: Any) -> dict[str, Any]:
        body = json.dumps({"query": query, "variables": variables}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            payload = json.loads(response.read())
        assert "errors" not in payload, payload
        return payload["data"]  # type: ignore[no-any-return]

    def wait_until_up(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"dagster dev exited early:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/server_info", timeout=3
                ) as r:
                    if json.loads(r.read()).get("dagster_version"):
                        return
            except (OSError, ValueError):
                pass
            time.sleep(1)
        pytest.fail(
            f"no answer on /server_info in {START_TIMEOUT}s:\n{self.log.read_text()[-3000:]}"
        )

    def stop(self) -> None:
        """``make stop``: from this non-interactive process, by the launcher's state file."""
        state = json.loads((self.home / "dagster-dev.json").read_text())
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "memory_pipeline.pipeline.devserver",
                "stop",
                "--home",
                str(self.home),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        self.proc.wait(timeout=60)
        assert not group_alive(int(state["pid"])), "processes of dagster dev outlived make stop"
        assert not (self.home / "dagster-dev.json").exists()


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path)


def start_server(home: Path, env: dict[str, str], log: Path) -> Server:
    """``make run``'s launcher, started as from a non-interactive shell's background job
    (SIGINT ignored), which is where a plain ``dagster dev`` used to ignore its stop."""
    write_instance(home)
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memory_pipeline.pipeline.devserver",
                "start",
                "--home",
                str(home),
                "--port",
                str(port),
                "--",
                "-w",
                "workspace.yaml",
            ],
            cwd=REPO,
            env={**env, "DAGSTER_HOME": str(home)},
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
    srv = Server(port, proc, log, home)
    srv.wait_until_up()
    return srv


@pytest.fixture
def server(corpus: Corpus, tmp_path: Path) -> Iterator[Server]:
    srv = start_server(
        tmp_path / "dagster_home", {**os.environ, **corpus.env()}, tmp_path / "dev.log"
    )
    try:
        yield srv
    finally:
        srv.stop()


ASSETS = "{ assetNodes { assetKey { path } assetChecksOrError { ... on AssetChecks { checks { name } } } } }"
SENSORS = """query($repo: RepositorySelector!) { sensorsOrError(repositorySelector: $repo) {
  ... on Sensors { results { name sensorState { status } } } } }"""
SCHEDULES = """query($repo: RepositorySelector!) { schedulesOrError(repositorySelector: $repo) {
  ... on Schedules { results { name cronSchedule scheduleState { status } } } } }"""
LAUNCH = """mutation($params: ExecutionParams!) { launchRun(executionParams: $params) {
  __typename ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
  ... on RunConfigValidationInvalid { errors { message } } } }"""
RUN = """query($id: ID!) { runOrError(runId: $id) { __typename ... on Run { status
  assetMaterializations { assetKey { path } } } } }"""


def test_dagster_dev_serves_the_pipeline_and_runs_the_ingest_job(
    server: Server, corpus: Corpus
) -> None:
    nodes = server.graphql(ASSETS)["assetNodes"]
    assert {"/".join(n["assetKey"]["path"]) for n in nodes} == ASSET_KEYS
    checks = {c["name"] for n in nodes for c in n["assetChecksOrError"]["checks"]}
    assert checks == {
        "sources_parse",
        "sources_ingested",
        "tagging_coverage",
        "vectors_valid",
        "index_consistency",
        "eval_regression",
        "no_stored_secret",
    }

    sensors = server.graphql(SENSORS, repo=REPO_SELECTOR)["sensorsOrError"]["results"]
    assert {s["name"]: s["sensorState"]["status"] for s in sensors} == {
        "source_files_sensor": "RUNNING",
        "pending_index_sensor": "RUNNING",
        "first_publication_sensor": "RUNNING",
        "alerts_sensor": "RUNNING",
    }
    schedules = server.graphql(SCHEDULES, repo=REPO_SELECTOR)["schedulesOrError"]["results"]
    assert {s["name"]: (s["cronSchedule"], s["scheduleState"]["status"]) for s in schedules} == {
        "weekly_forgetting_report": ("0 3 * * 1", "RUNNING"),
        "hourly_health_checks": ("7 * * * *", "RUNNING"),
        "nightly_evaluation": ("30 2 * * *", "RUNNING"),
    }

    paths = [str(corpus.notes / "fusion.md"), str(corpus.papers / "bm25.md")]
    params = {
        "selector": {**REPO_SELECTOR, "jobName": "ingest_sources"},
        "runConfigData": {"ops": {"source_files": {"config": {"paths": paths}}}},
    }
    launched = server.graphql(LAUNCH, params=params)["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    run_id = launched["run"]["runId"]

    deadline = time.monotonic() + RUN_TIMEOUT
    status = "QUEUED"
    while time.monotonic() < deadline:
        run = server.graphql(RUN, id=run_id)["runOrError"]
        status = run["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(2)
    assert status == "SUCCESS", server.log.read_text()[-4000:]
    materialized = {"/".join(m["assetKey"]["path"]) for m in run["assetMaterializations"]}
    assert {"source_files", "documents", "chunks", "embeddings", "search_index"} <= materialized


def test_a_second_start_for_the_same_data_folder_is_refused(server: Server) -> None:
    """A second ``make run`` would fail on the port but leave a daemon fighting the first."""
    for action in ("check", "start"):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "memory_pipeline.pipeline.devserver",
                action,
                "--home",
                str(server.home),
                "--port",
                str(free_port()),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 1, out.stdout + out.stderr
        assert "already running for this data folder" in out.stderr
        assert "make stop" in out.stderr


def wait_for(what: str, condition: Any, timeout: float, server: Server) -> float:
    """Seconds until ``condition()`` held; fails with the server log after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(2)
    pytest.fail(f"{what}: not within {timeout:.0f}s\n{server.log.read_text()[-4000:]}")


FIRST_START = """{ assetNodes { assetKey { path } assetMaterializations(limit: 1) { runId }
  assetChecksOrError { ... on AssetChecks { checks { name
    executionForLatestMaterialization { status } } } } } }"""


def test_the_first_start_materializes_every_asset_and_runs_every_check(
    server: Server, corpus: Corpus
) -> None:
    """No click: the sensor ingests the roots, then evaluation and the forgetting report run."""

    def state() -> tuple[set[str], dict[str, str | None]]:
        nodes = server.graphql(FIRST_START)["assetNodes"]
        materialized = {
            "/".join(n["assetKey"]["path"]) for n in nodes if n["assetMaterializations"]
        }
        checks = {
            c["name"]: (c["executionForLatestMaterialization"] or {}).get("status")
            for n in nodes
            for c in n["assetChecksOrError"]["checks"]
        }
        return materialized, checks

    def done() -> bool:
        materialized, checks = state()
        # every check executed and finished (a check still IN_PROGRESS has not)
        return materialized == ASSET_KEYS and all(
            status not in (None, "IN_PROGRESS") for status in checks.values()
        )

    seconds = wait_for("every asset materialized", done, 300, server)
    _, checks = state()
    print(f"first start: every asset materialized and every check executed after {seconds:.0f}s")
    assert checks["eval_regression"] == "SUCCEEDED"
    assert checks["sources_ingested"] == "SUCCEEDED"
    assert checks["index_consistency"] == "SUCCEEDED"


BIG_FILES = 30


@pytest.fixture
def big_corpus(tmp_path: Path) -> Corpus:
    """The corpus plus files big enough that ingesting them takes seconds (to kill it)."""
    corpus = make_corpus(tmp_path, conversations=False)
    words = ["memory", "fusion", "index", "vector", "token", "agent", "search", "decay"]
    for i in range(BIG_FILES):
        paragraphs = [
            " ".join(
                f"{words[(i + j + k) % len(words)]}{(i * 7919 + j * 31 + k) % 997}"
                for k in range(40)
            )
            for j in range(3000)
        ]
        (corpus.notes / f"big-{i:02}.md").write_text(f"# Big {i}\n\n" + "\n\n".join(paragraphs))
    return corpus


def test_a_killed_run_worker_loses_no_file_and_leaves_no_slot_claimed(
    big_corpus: Corpus, tmp_path: Path, webhook: Webhook
) -> None:
    """kill -9 of the run worker mid-ingest, and of its retry's: Dagster fails both runs and
    frees their pool slots, and the source sensor asks again, so the files are ingested
    anyway with no human action. Each failed run reaches the webhook and the alert log
    once, and so does the job's recovery."""
    from memory_pipeline.pipeline.launcher import worker_pid
    from memory_pipeline.sources.ledger import read_ledger
    from memory_pipeline.sources.sources_file import load_sources
    from memory_pipeline.sources.status import not_ingested
    from memory_pipeline.store import Store

    home = tmp_path / "dagster_home"
    alert_log = tmp_path / "alerts.jsonl"
    env = {
        **os.environ,
        **big_corpus.env(
            MEMORY_PIPELINE_ALERT_WEBHOOK=webhook.url, MEMORY_PIPELINE_ALERT_LOG=str(alert_log)
        ),
    }
    srv = start_server(home, env, tmp_path / "dev.log")
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:

            def ingesting(skip: set[str]) -> tuple[dg.DagsterRun, int] | None:
                for run in instance.get_runs(
                    filters=dg.RunsFilter(
                        job_name="ingest_sources", statuses=[dg.DagsterRunStatus.STARTED]
                    )
                ):
                    if run.run_id in skip:
                        continue
                    steps = instance.all_logs(run.run_id, of_type=DagsterEventType.STEP_START)
                    if any(e.step_key == "documents_and_chunks" for e in steps):
                        found = worker_pid(instance, run.run_id)
                        if found:
                            return run, found[0]
                return None

            def kill_one(skip: set[str]) -> dg.DagsterRun:
                wait_for("an ingest run in documents_and_chunks", lambda: ingesting(skip), 300, srv)
                time.sleep(2)  # well inside the step: some files in, most not
                found = ingesting(skip)
                assert found is not None, "the ingest finished before it could be killed"
                run, pid = found
                os.kill(pid, signal.SIGKILL)

                def failed() -> bool:
                    after = instance.get_run_by_id(run.run_id)
                    return after is not None and after.status is dg.DagsterRunStatus.FAILURE

                wait_for("the killed run marked failed", failed, 120, srv)
                return run

            # The run, then the retry Dagster makes of it: the source sensor is left to
            # ask again (its backoff), which is what a run that keeps dying meets.
            killed = kill_one(set())
            killed_at = time.monotonic()
            retry = kill_one({killed.run_id})
            assert retry.tags.get("dagster/parent_run_id") == killed.run_id

            settings = Settings.from_env(big_corpus.env())
            cfg = load_sources(big_corpus.sources_file)

            def all_in() -> bool:
                store = Store(settings.url)
                try:
                    return not not_ingested(store, cfg, read_ledger(cfg.state_path))
                finally:
                    store.close()

            wait_for("every file ingested after the kill", all_in, 400, srv)
            recovered = time.monotonic() - killed_at

            def slots_free() -> bool:
                info = instance.event_log_storage.get_concurrency_info("source_ingest")
                return not info.claimed_slots and not info.pending_steps

            wait_for("no source_ingest slot claimed", slots_free, 120, srv)

            def later_runs() -> list[dg.DagsterRun]:
                return [
                    r
                    for r in instance.get_runs(filters=dg.RunsFilter(job_name="ingest_sources"))
                    if r.run_id not in (killed.run_id, retry.run_id)
                    and r.status is dg.DagsterRunStatus.SUCCESS
                ]

            wait_for("a later ingest run succeeded", lambda: bool(later_runs()), 300, srv)
            later = later_runs()
            assert not any(r.tags.get("dagster/parent_run_id") == retry.run_id for r in later), (
                "a retry of a retry: only one was configured"
            )
            assert any(r.tags.get("dagster/sensor_name") == "source_files_sensor" for r in later)
            print(
                f"killed worker and its retry: every file ingested {recovered:.0f}s after "
                "the first kill, by the source sensor"
            )

            def run_alerts() -> list[tuple[str, str]]:
                return [
                    (a["alert"]["state"], a["alert"]["run_id"] or "")
                    for a in webhook.delivered()
                    if a["alert"]["kind"] == "run" and a["alert"]["subject"] == "ingest_sources"
                ]

            wait_for(
                "the failure and the recovery at the webhook",
                lambda: {s for s, _ in run_alerts()} >= {"failed", "recovered"},
                120,
                srv,
            )
            time.sleep(35)  # one more alerts tick: nothing is announced twice
            failures = [r for s, r in run_alerts() if s == "failed"]
            assert sorted(failures) == sorted([killed.run_id, retry.run_id]), run_alerts()
            assert [s for s, _ in run_alerts()].count("recovered") == 1
            logged = AlertLog(alert_log).read().alerts
            assert {(a.kind, a.state, a.run_id) for a in logged} >= {
                ("run", "failed", killed.run_id),
                ("run", "failed", retry.run_id),
            }
            assert all(a.delivered for a in logged)
            print(f"alerts: {[(a.kind, a.subject, a.state) for a in logged]}")
    finally:
        srv.stop()
