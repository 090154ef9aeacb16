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

import pytest

from memory_pipeline.pipeline.instance import write_instance
from tests.test_pipeline_support import ASSET_KEYS, Corpus, make_corpus

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
REPO_SELECTOR = {"repositoryLocationName": "memory_pipeline", "repositoryName": "__repository__"}
START_TIMEOUT = 180
RUN_TIMEOUT = 240


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.port = port
        self.proc = proc
        self.log = log

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

    def group_alive(self, pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        """Stop the whole process group (webserver, daemon, code servers, runs)."""
        pgid = os.getpgid(self.proc.pid)
        os.killpg(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while self.group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if self.group_alive(pgid):  # children that outlived the parent
            os.killpg(pgid, signal.SIGKILL)
            time.sleep(1)
        assert not self.group_alive(pgid)


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return make_corpus(tmp_path)


@pytest.fixture
def server(corpus: Corpus, tmp_path: Path) -> Iterator[Server]:
    home = tmp_path / "dagster_home"
    write_instance(home)
    port = free_port()
    log = tmp_path / "dagster-dev.log"
    env = {**os.environ, **corpus.env(), "DAGSTER_HOME": str(home)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "dagster"),
                "dev",
                "-w",
                "workspace.yaml",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own session and process group: `dagster dev` started in the background of
            # a non-interactive shell ignores SIGINT/SIGTERM otherwise (DESIGN §4).
            start_new_session=True,
        )
    srv = Server(port, proc, log)
    try:
        srv.wait_until_up()
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
    }

    sensors = server.graphql(SENSORS, repo=REPO_SELECTOR)["sensorsOrError"]["results"]
    assert {s["name"]: s["sensorState"]["status"] for s in sensors} == {
        "source_files_sensor": "RUNNING",
        "pending_index_sensor": "RUNNING",
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
