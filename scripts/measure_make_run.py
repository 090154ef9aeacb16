#!/usr/bin/env python3
"""Measure ``make run``: time until the demo corpus is searchable, and Dagster's memory.

Starts ``make run`` in its own session (``dagster dev`` ignores SIGINT/SIGTERM when
started in the background of a non-interactive shell, DESIGN §4), polls

* ``/server_info`` — the UI answers;
* the store — every demo file is ingested (``memory-pipeline sources status``'s view);
* the published index — it holds every live chunk (nothing waits for update-index);
* a search for a demo sentence — it comes back from the published index;
* the asset checks — each has a result in Dagster's instance (via GraphQL);

then sums the resident memory (RSS, /proc) of every process in the session, and
stops the whole process group. Usage::

    scripts/measure_make_run.py [--data /tmp/mr-data] [--port 3311] [--timeout 300]

The data folder is wiped first, so the run starts from an empty memory (the model
cache and the virtualenv are kept: "already installed").
"""

from __future__ import annotations

import argparse
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


def rss_kib(pgid: int) -> dict[int, tuple[str, int]]:
    """pid -> (command, VmRSS KiB) for every process in the process group."""
    out: dict[int, tuple[str, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # stat field 5: process group id
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


NIGHTLY_CHECKS = {"eval_regression"}  # runs with the nightly evaluation, not at start


def checks_done(port: int) -> dict[str, str]:
    """Each asset check's latest execution status ("none" when it never ran)."""
    out = {}
    for node in graphql(port, CHECKS_QUERY)["data"]["assetNodes"]:
        for check in (node.get("assetChecksOrError") or {}).get("checks", []):
            if check["name"] in NIGHTLY_CHECKS:
                continue
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


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the whole session's process group, SIGKILL if it lingers."""
    pgid = os.getpgid(proc.pid)
    os.killpg(pgid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        proc.wait()
    time.sleep(1)
    if rss_kib(pgid):
        os.killpg(pgid, signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="/tmp/mr-data")
    parser.add_argument("--port", type=int, default=3311)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--keep", action="store_true", help="leave the server running")
    parser.add_argument("--screenshot", help="also save the lineage page here (PNG)")
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
            sample = rss_kib(os.getpgid(proc.pid))
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
                found = subprocess.run(
                    [
                        str(REPO / ".venv/bin/memory-pipeline"),
                        "search",
                        QUERY,
                        "-k",
                        "1",
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
                marks["search_ok"] = float("Reciprocal" in found.stdout or "RRF" in found.stdout)
            if "indexed" in marks:
                done = checks_done(args.port)
                if done and all(s not in ("none", "IN_PROGRESS", "PLANNED") for s in done.values()):
                    marks["checks"] = t
                    marks["check_statuses"] = done  # type: ignore[assignment]
                    break
        time.sleep(2)
        procs = rss_kib(os.getpgid(proc.pid))
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
    finally:
        if not args.keep:
            stop(proc)
    return 0 if "checks" in marks else 1


if __name__ == "__main__":
    sys.exit(main())
