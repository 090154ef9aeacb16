#!/usr/bin/env python3
"""Measure ``make run``: time until the demo corpus is searchable, and Dagster's memory.

Starts ``make run`` in its own session (``dagster dev`` ignores SIGINT/SIGTERM when
started in the background of a non-interactive shell, DESIGN §4), polls

* ``/server_info`` — the UI answers;
* the store — every demo file is ingested (``memory-pipeline sources status``'s view);
* the published index — it holds every live chunk (nothing waits for update-index);
* a search for a demo sentence — it comes back from the published index;
* the asset checks — each has a result in Dagster's instance (via GraphQL);
* the first-start assets — the evaluation and the forgetting report materialized,
  ``eval_regression`` executed;

then sums the resident memory (RSS, /proc) of every process in the session. With
``--after`` (the default) it goes on, as an operator's first bad day would:

* **add**: a new file under a source root → seconds until it is stored (and so
  searchable: serving searches what the published index lacks), and until the
  published index holds it; then ``memory-pipeline search`` must find it;
* **kill**: another new file, and ``kill -9`` of the run worker as soon as its
  ``documents_and_chunks`` step started → seconds until the file is stored and
  indexed anyway, with no human action, and until no pool slot is claimed;

and stops it with ``make stop`` (from this non-interactive process), checking that
no process of the session is left. Usage::

    scripts/measure_make_run.py [--data /tmp/mr-data] [--port 3311] [--timeout 300] [--no-after]

The data folder is wiped first, so the run starts from an empty memory (the model
cache and the virtualenv are kept: "already installed").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUERY = "reciprocal rank fusion constant k"


def groups(proc: subprocess.Popen[bytes], data: Path) -> set[int]:
    """The process groups of a make run: make's own, and the session its launcher starts
    ``dagster dev`` in (named in ``dagster_home/dagster-dev.json``)."""
    out = {proc.pid}  # started with start_new_session: its pid is its group's id
    with contextlib.suppress(OSError, ValueError, KeyError):
        out.add(int(json.loads((data / "dagster_home/dagster-dev.json").read_text())["pid"]))
    return out


def rss_kib(pgids: int | set[int]) -> dict[int, tuple[str, int]]:
    """pid -> (command, VmRSS KiB) for every process in the process group(s)."""
    wanted = {pgids} if isinstance(pgids, int) else pgids
    out: dict[int, tuple[str, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) not in wanted:  # stat field 5: process group id
                continue
            status = (entry / "status").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except (OSError, IndexError, ValueError):
            continue
        rss = next(
            (int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0
        )
        out[int(entry.name)] = (cmd, rss)
    return out


def graphql(port: int, query: str, **variables: object) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


CHECKS_QUERY = """
{ assetNodes { assetKey { path } assetChecksOrError { ... on AssetChecks { checks { name } } } } }
"""
EXECUTIONS_QUERY = """
query($key: AssetKeyInput!, $name: String!) {
  assetCheckExecutions(assetKey: $key, checkName: $name, limit: 1) { status } }
"""


FIRST_START_ASSETS = {"retrieval_eval", "forgetting_candidates"}
MATERIALIZED_QUERY = (
    "{ assetNodes { assetKey { path } assetMaterializations(limit: 1) { runId } } }"
)
RUNS_QUERY = """{ runsOrError(filter: {pipelineName: "ingest_sources", statuses: [STARTED]}) {
  ... on Runs { results { runId stepStats { stepKey status } } } } }"""
LOGS_QUERY = """query($id: ID!) { logsForRun(runId: $id) {
  ... on EventConnection { events { ... on MessageEvent { message } } } } }"""
RUN_STATUS_QUERY = """query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"""
SLOTS_QUERY = """{ instance { concurrencyLimits { concurrencyKey
  claimedSlots { runId stepKey } pendingSteps { runId stepKey } } } }"""


def materialized(port: int) -> set[str]:
    nodes = graphql(port, MATERIALIZED_QUERY)["data"]["assetNodes"]
    return {"/".join(n["assetKey"]["path"]) for n in nodes if n["assetMaterializations"]}


def checks_done(port: int) -> dict[str, str]:
    """Each asset check's latest execution status ("none" when it never ran)."""
    out = {}
    for node in graphql(port, CHECKS_QUERY)["data"]["assetNodes"]:
        for check in (node.get("assetChecksOrError") or {}).get("checks", []):
            key = {"path": node["assetKey"]["path"]}
            data = graphql(port, EXECUTIONS_QUERY, key=key, name=check["name"])["data"]
            runs = data["assetCheckExecutions"]
            out[check["name"]] = runs[0]["status"] if runs else "none"
    return out


def memory_state(data: Path) -> tuple[int, int, int, int]:
    """(documents, chunks, chunks the published index lacks, index version or -1)."""
    code = (
        "import json,sys;from pathlib import Path;from memory_pipeline.store import Store;"
        "from memory_pipeline.index.versions import read_current;"
        f"s=Store('sqlite:///{data}/memory.db');c=s.counts();cur=read_current(Path('{data}/indices'));"
        "print(json.dumps([c['documents'],c['chunks'],len(s.pending_adds()),cur[0].version if cur else -1]))"
    )
    out = subprocess.run(
        [str(REPO / ".venv/bin/python"), "-c", code], capture_output=True, text=True, cwd=REPO
    )
    if out.returncode:
        return 0, 0, 0, -1
    return tuple(json.loads(out.stdout))  # type: ignore[return-value]


def search(data: Path, query: str, k: int) -> str:
    """What ``memory-pipeline search`` prints for ``query`` against the make-run memory."""
    found = subprocess.run(
        [
            str(REPO / ".venv/bin/memory-pipeline"),
            "search",
            query,
            "-k",
            str(k),
            "--db",
            f"{data}/memory.db",
            "--index",
            f"{data}/indices",
            "--no-access",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    return found.stdout


def search_finds(data: Path, query: str, phrase: str) -> bool:
    return phrase in " ".join(search(data, query, 3).split())


def wait(condition, timeout: float, every: float = 1.0) -> float | None:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return round(time.monotonic() - started, 1)
        time.sleep(every)
    return None


def add_file(data: Path, name: str, phrase: str) -> Path:
    path = data / "sources" / "principles" / name
    path.write_text(f"# {name}\n\n{phrase}\n", encoding="utf-8")
    return path


def worker_in_documents_step(port: int) -> tuple[str, int] | None:
    """(run id, worker pid) of an ingest run whose documents_and_chunks step is running."""
    for run in graphql(port, RUNS_QUERY)["data"]["runsOrError"]["results"]:
        steps = {s["stepKey"]: s["status"] for s in run["stepStats"]}
        if steps.get("documents_and_chunks") != "IN_PROGRESS":
            continue
        events = graphql(port, LOGS_QUERY, id=run["runId"])["data"]["logsForRun"]["events"]
        for event in events:
            message = event.get("message") or ""
            if message.startswith("Started process for run (pid: "):
                return run["runId"], int(message.split("pid: ")[1].split(")")[0])
    return None


def after_first_start(data: Path, port: int, timeout: float) -> dict[str, object]:
    """Add a file; add another and kill its run's worker. Seconds for each, and the slots."""
    out: dict[str, object] = {}
    added = "Herons gather at the lighthouse when the tide turns westward."
    docs_before = memory_state(data)[0]
    add_file(data, "measure-added.md", added)
    # Stored is searchable: serving also searches the chunks the published index lacks.
    out["added_file_to_stored"] = wait(lambda: memory_state(data)[0] > docs_before, timeout, 0.5)
    out["added_file_to_indexed"] = wait(lambda: memory_state(data)[2] == 0, timeout, 0.5)
    out["added_file_found_by_search"] = search_finds(
        data, "herons lighthouse tide", "Herons gather"
    )

    phrase = "Otters ferry pebbles across the quarry pond every autumn."
    docs_before = memory_state(data)[0]
    add_file(data, "measure-killed.md", phrase)
    added_at = time.monotonic()
    victim: list[tuple[str, int]] = []

    def found() -> bool:
        hit = worker_in_documents_step(port)
        if hit:
            victim.append(hit)
        return bool(hit)

    if wait(found, timeout, 0.2) is None:
        out["kill"] = "no ingest run reached documents_and_chunks"
        return out
    run_id, pid = victim[0]
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    out["kill_after_added_s"] = round(killed_at - added_at, 1)
    out["killed_run_marked"] = wait(
        lambda: (
            graphql(port, RUN_STATUS_QUERY, id=run_id)["data"]["runOrError"]["status"]
            in ("FAILURE", "CANCELED")
        ),
        timeout,
    )
    out["killed_to_stored"] = wait(lambda: memory_state(data)[0] > docs_before, timeout, 0.5)
    out["killed_to_indexed"] = wait(lambda: memory_state(data)[2] == 0, timeout, 0.5)
    out["killed_file_found_by_search"] = search_finds(data, "otters pebbles quarry", "Otters ferry")

    def slots_free() -> bool:
        limits = graphql(port, SLOTS_QUERY)["data"]["instance"]["concurrencyLimits"]
        return not any(limit["claimedSlots"] or limit["pendingSteps"] for limit in limits)

    out["slots_free_after_kill"] = wait(slots_free, timeout)
    out["killed_run_status"] = graphql(port, RUN_STATUS_QUERY, id=run_id)["data"]["runOrError"][
        "status"
    ]
    return out


def make_stop(data: Path, proc: subprocess.Popen[bytes]) -> dict[str, object]:
    """``make stop`` from this (non-interactive) process; is anything of the session left?"""
    pgids = groups(proc, data)
    started = time.monotonic()
    done = subprocess.run(
        ["make", "stop", f"DATA={data}"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=60)
    return {
        "make_stop_exit": done.returncode,
        "make_stop_seconds": round(time.monotonic() - started, 1),
        "processes_left": len(rss_kib(pgids)),
    }


def stop(proc: subprocess.Popen[bytes], data: Path) -> None:
    """The fallback when make stop did not run: SIGTERM to every group, SIGKILL if they linger."""
    pgids = groups(proc, data)
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    time.sleep(1)
    for pid in rss_kib(pgids):  # whatever outlived the SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/tmp/mr-data")
    parser.add_argument("--port", type=int, default=3311)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--keep", action="store_true", help="leave the server running")
    parser.add_argument("--screenshot", help="also save the lineage page here (PNG)")
    parser.add_argument(
        "--no-after",
        dest="after",
        action="store_false",
        help="stop after the first start (no added file, no killed run)",
    )
    args = parser.parse_args()
    data = Path(args.data).absolute()
    shutil.rmtree(data, ignore_errors=True)
    expected_files = sum(1 for p in (REPO / "demo/corpus").rglob("*") if p.is_file())

    log = open(data.parent / f"{data.name}-make-run.log", "w")  # noqa: SIM115
    started = time.monotonic()
    proc = subprocess.Popen(
        ["make", "run", f"DATA={data}", f"PORT={args.port}"],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stop it with killpg
    )
    marks: dict[str, float] = {}
    peak: dict[int, tuple[str, int]] = {}  # the session's processes at the highest total RSS
    try:
        while time.monotonic() - started < args.timeout:
            time.sleep(1)
            t = round(time.monotonic() - started, 1)
            sample = rss_kib(groups(proc, data))
            if sum(r for _c, r in sample.values()) > sum(r for _c, r in peak.values()):
                peak = sample
            if "ui" not in marks:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{args.port}/server_info", timeout=2)
                    marks["ui"] = t
                except OSError:
                    continue
            docs, chunks, lacking, version = memory_state(data)
            if "ingested" not in marks and docs >= expected_files:
                marks["ingested"] = t
            if "indexed" not in marks and docs >= expected_files and version > 0 and not lacking:
                marks["indexed"] = t
                found = search(data, QUERY, 1)
                marks["search_ok"] = float("Reciprocal" in found or "RRF" in found)
            if "indexed" in marks and "checks" not in marks:
                done = checks_done(args.port)
                if done and all(s not in ("none", "IN_PROGRESS", "PLANNED") for s in done.values()):
                    marks["checks"] = t
                    marks["check_statuses"] = done  # type: ignore[assignment]
            if "checks" in marks and materialized(args.port) >= FIRST_START_ASSETS:
                marks["first_start_assets"] = t
                marks["check_statuses"] = checks_done(args.port)  # type: ignore[assignment]
                marks["materialized"] = sorted(materialized(args.port))  # type: ignore[assignment]
                break
        time.sleep(2)
        procs = rss_kib(groups(proc, data))
        if args.screenshot:
            subprocess.run(
                [
                    str(REPO / ".venv/bin/python"),
                    str(REPO / "scripts/screenshot_lineage.py"),
                    "--url",
                    f"http://127.0.0.1:{args.port}",
                    "--out",
                    args.screenshot,
                ],
                check=False,
            )
        total = sum(r for _c, r in procs.values())
        print(json.dumps({"seconds": marks, "documents": docs, "chunks": chunks}, indent=1))
        print(f"RSS of {len(procs)} processes in the make-run session: {total / 1024:.0f} MiB")
        for pid, (cmd, rss) in sorted(procs.items(), key=lambda kv: -kv[1][1]):
            print(f"  {rss / 1024:7.0f} MiB  {pid}  {cmd}")
        top = sum(r for _c, r in peak.values())
        print(
            f"peak RSS while the demo was ingested: {top / 1024:.0f} MiB in {len(peak)} processes"
        )
        for pid, (cmd, rss) in sorted(peak.items(), key=lambda kv: -kv[1][1])[:3]:
            print(f"  {rss / 1024:7.0f} MiB  {pid}  {cmd}")
        if args.after and "first_start_assets" in marks:
            after = after_first_start(data, args.port, args.timeout)
            print(json.dumps({"after_first_start_seconds": after}, indent=1))
        if not args.keep:
            print(json.dumps(make_stop(data, proc), indent=1))
    finally:
        if not args.keep and proc.poll() is None:
            stop(proc, data)
    return 0 if "first_start_assets" in marks else 1


if __name__ == "__main__":
    sys.exit(main())
