"""The install a user gets, and its first use: side by side with ``python -c pass``, in one run.

Run by hand: ``python bench/bench_install.py`` (about 2 minutes here; ``--venv DIR`` reuses
an environment it made before). It builds the wheel of this checkout, ``pip install``-s it
into a new virtual environment with the package index pip is configured with (no index of
torch's), and prints:

* the install: wall time, size on disk, and any torch, nvidia, triton or Dagster package;
* in that environment, each in fresh processes: ``python -c pass`` (the interpreter's own
  share), ``memory-pipeline --help``, the first ``ingest`` of one note on an empty model
  cache (the default model's graph built then: wall and peak RSS), the first MCP search
  on an empty model cache (spawn of ``memory-pipeline serve`` to the first
  ``hybrid_search`` result), and the same with the cache warm (median of ``--runs``);
* what the heavy dependencies cost, read in this (the development) environment: the size
  of each distribution with what only it pulls in, and its import time (median of three
  fresh processes), to show why each is a default dependency or an extra.

``--baseline DIR`` (an environment of an earlier commit, kept with ``--keep``) adds a table
of the first uses, ``--help`` and the warm spawn in both environments, measured in
alternating rounds (median of ``--rounds``), each on a fresh model cache.

The machine is shared and noisy: compare the rows of one run. The load average is printed
before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.project.wheels import build_wheel  # noqa: E402

NOTE = "We dropped Redis for the session cache: SQLite with a five-minute TTL was enough.\n"
#: Module imported, distribution it comes from, and what needs it.
HEAVY = [
    ("torch", "torch", "the torch extra: other models, the cross-encoder"),
    ("sentence_transformers", "sentence-transformers", "the torch extra"),
    ("dagster", "dagster", "the pipeline extra: make run, dagster dev"),
    ("dagster_webserver", "dagster-webserver", "the pipeline extra: its UI"),
    ("matplotlib.pyplot", "matplotlib", "eval's chart (default)"),
    ("onnxruntime", "onnxruntime", "every embedding of the default model (default)"),
    ("onnx", "onnx", "the default model's graph, built once (default)"),
    ("faiss", "faiss-cpu", "dense search (default)"),
    ("tantivy", "tantivy", "BM25 (default)"),
    ("mcp", "mcp", "serve (default)"),
    ("sqlalchemy", "sqlalchemy", "the store (default)"),
    ("detect_secrets", "detect-secrets", "redaction (default)"),
    ("psycopg", "psycopg", "a PostgreSQL store (default)"),
]


def median_wall(cmd: list[str], env: dict[str, str], runs: int) -> float:
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True, cwd=tempfile.gettempdir())
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def du_mb(folder: Path) -> float:
    done = subprocess.run(["du", "-sk", str(folder)], check=True, capture_output=True, text=True)
    return int(done.stdout.split()[0]) / 1024


def make_venv(folder: Path) -> tuple[Path, float]:
    wheel = build_wheel(folder)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    started = time.perf_counter()
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        check=True,
        env=env,
        capture_output=True,
    )
    return venv, time.perf_counter() - started


def user_env(home: Path, memory: Path) -> dict[str, str]:
    """A user with an empty home (so an empty model cache) and a memory at ``memory``."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "HYBRID_RAG_DB_PATH": str(memory / "memory.db"),
        "HYBRID_RAG_INDEX_PATH": str(memory / "indices"),
        "HYBRID_RAG_ARCHIVE_PATH": str(memory / "archive"),
        "HF_HUB_OFFLINE": "1",
    }


def first_ingest(venv: Path, folder: Path) -> tuple[float, float]:
    """Wall and peak RSS (MB) of ``ingest`` of one note on an empty model cache."""
    folder.mkdir(parents=True)
    note = folder / "note.md"
    note.write_text(NOTE, encoding="utf-8")
    env = user_env(folder / "home", folder / "memory")
    started = time.perf_counter()
    done = subprocess.run(
        [
            "/usr/bin/time",
            "-f",
            "PEAK_KB %M",
            str(venv / "bin" / "memory-pipeline"),
            "ingest",
            str(note),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=folder,
    )
    wall = time.perf_counter() - started
    peak = int(re.findall(r"PEAK_KB (\d+)", done.stderr)[-1]) / 1024
    return wall, peak


def mcp_first_result(venv: Path, env: dict[str, str], *, ingest: bool) -> float:
    """Spawn ``memory-pipeline serve`` over stdio, then the first ``hybrid_search`` result
    (an ``ingest_text`` first when ``ingest``: a fresh memory has nothing to find)."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=str(venv / "bin" / "memory-pipeline"), args=["serve"], env=env,
        cwd=tempfile.gettempdir(),
    )  # fmt: skip
    out: dict[str, float] = {}

    async def run() -> None:
        started = time.perf_counter()
        async with Client(params) as client:
            if ingest:
                stored = await client.call_tool("ingest_text", {"text": NOTE, "title": "cache"})
                assert not stored.is_error, stored
            found = await client.call_tool("hybrid_search", {"query": "why did we drop Redis?"})
            assert not found.is_error, found
            out["first"] = time.perf_counter() - started

    anyio.run(run)
    return out["first"]


def side_by_side(baseline: Path, venv: Path, work: Path, rounds: int) -> None:
    """The first uses, ``--help`` and a warm spawn in ``baseline`` and ``venv``, alternating."""
    columns = {"baseline": baseline, "this": venv}
    rows: dict[str, dict[str, list[float]]] = {}

    def add(row: str, column: str, value: float) -> None:
        rows.setdefault(row, {}).setdefault(column, []).append(value)

    for round_ in range(rounds):
        for column, env_dir in columns.items():
            folder = work / f"side-{column}-{round_}"
            wall, peak = first_ingest(env_dir, folder / "ingest")
            add("first ingest of one note, empty model cache (s)", column, wall)
            add("its peak RSS (MB)", column, peak)
            fresh = user_env(folder / "mcp" / "home", folder / "mcp" / "memory")
            add(
                "first MCP search, empty model cache (s)",
                column,
                mcp_first_result(env_dir, fresh, ingest=True),
            )
            add(
                "MCP spawn → first hybrid_search, warm cache (s)",
                column,
                mcp_first_result(env_dir, fresh, ingest=False),
            )
            script = [str(env_dir / "bin" / "memory-pipeline"), "--help"]
            add("memory-pipeline --help (s)", column, median_wall(script, fresh, 1))
            shutil.rmtree(folder, ignore_errors=True)
    print(f"| median of {rounds} alternating rounds | baseline | this |")
    print("|---|---|---|")
    for row, values in rows.items():
        cells = [f"{statistics.median(values[c]):.2f}" for c in columns]
        print(f"| {row} | {' | '.join(cells)} |")
    print(f"\nload average: {os.getloadavg()[0]:.2f}\n", flush=True)


def distribution_mb(name: str, seen: set[str]) -> float:
    """The files of ``name`` and of what it requires that nothing counted before holds."""
    total, todo = 0, [name]
    while todo:
        dist_name = re.split(r"[ ;<>=!~\[]", todo.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if dist_name in seen:
            continue
        seen.add(dist_name)
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            continue
        for f in dist.files or []:
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                total += path.stat().st_size
        todo += [r for r in dist.requires or [] if "extra ==" not in r]
    return total / 2**20


def core_requirements() -> list[str]:
    return [
        r for r in metadata.distribution("memory-pipeline").requires or [] if "extra ==" not in r
    ]


def closure(requirements: list[str]) -> set[str]:
    seen: set[str] = set()
    for requirement in requirements:
        distribution_mb(requirement, seen)
    return seen


def own_mb(dist: str) -> float:
    """What the default install would lose without ``dist``: its files and those of what
    no other default dependency requires."""
    others = [r for r in core_requirements() if not r.lower().startswith(dist)]
    return distribution_mb(dist, closure(others))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--venv", type=Path, help="an environment this bench made before")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the environment made here")
    parser.add_argument(
        "--baseline", type=Path, help="an environment of an earlier commit, measured beside"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (--baseline)")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; cores: {os.cpu_count()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-install-"))
    try:
        if args.venv:
            venv, install_wall = args.venv, float("nan")
        else:
            venv, install_wall = make_venv(work)
        listed = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        names = sorted(p["name"].lower() for p in json.loads(listed.stdout))
        heavy = [n for n in names if n.startswith(("torch", "nvidia", "triton", "dagster"))]
        print(
            f"\ninstall: {install_wall:.1f} s, {du_mb(venv):.0f} MB on disk, {len(names)} packages"
        )
        print(f"torch, nvidia, triton or dagster packages: {heavy or 'none'}\n")

        script = str(venv / "bin" / "memory-pipeline")
        quiet = user_env(work / "quiet-home", work / "quiet-memory")
        rows = [
            (
                "python -c pass",
                median_wall([str(venv / "bin" / "python"), "-c", "pass"], quiet, args.runs),
            ),
            ("memory-pipeline --help", median_wall([script, "--help"], quiet, args.runs)),
        ]
        wall, peak = first_ingest(venv, work / "first-ingest")
        rows.append((f"first ingest of one note, empty model cache (peak RSS {peak:.0f} MB)", wall))
        fresh = user_env(work / "first-mcp" / "home", work / "first-mcp" / "memory")
        rows.append(
            (
                "first MCP search, empty model cache (ingest_text first)",
                mcp_first_result(venv, fresh, ingest=True),
            )
        )
        warm = [mcp_first_result(venv, fresh, ingest=False) for _ in range(args.runs)]
        rows.append(
            ("MCP spawn → first hybrid_search, warm cache (median)", statistics.median(warm))
        )
        print("| in the installed environment | wall (s) |\n|---|---|")
        for label, seconds in rows:
            print(f"| {label} | {seconds:.2f} |")
        print(f"\nload average: {os.getloadavg()[0]:.2f}\n", flush=True)
        if args.baseline:
            side_by_side(args.baseline, venv, work, args.rounds)

        extras_seen = closure(core_requirements())
        print("| module (development environment) | MB it alone brings | import (s) | needed by |")
        print("|---|---|---|---|")
        base = median_wall([sys.executable, "-c", "pass"], dict(os.environ), 3)
        for module, dist, needed in HEAVY:
            # an extra's row: what it adds to the default install and to the rows above
            size = own_mb(dist) if dist in extras_seen else distribution_mb(dist, extras_seen)
            imported = median_wall([sys.executable, "-c", f"import {module}"], dict(os.environ), 3)
            print(f"| {module} | {size:.0f} | {imported - base:.2f} | {needed} |")
        print(f"\n(python -c pass: {base:.3f} s, subtracted)")
    finally:
        if args.keep and not args.venv:
            print(f"environment kept: {venv} (--venv to reuse it)")
            shutil.rmtree(work / "src", ignore_errors=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
