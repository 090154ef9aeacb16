"""Time of ``memory-pipeline scrub`` on a memory of about 10,000 chunks.

Run by hand: ``python bench/bench_scrub.py [--memory DIR] [--model NAME] [--secrets N]
[--rounds R]``. The memory is ``bench/bench_ui.py``'s (SciFact's corpus, ~11,400 chunks
with the default model; built once into ``DIR``, 8-15 minutes here). Each round copies it,
writes ``N`` secrets (``tests/hygiene/corpus.py``'s kinds, made from a seeded generator)
into as many chunks as a memory filled before redaction would hold them, and times, each
as the command a person runs (a process, model load included):

* ``scrub`` — the dry run (what the health check runs too);
* ``scrub --apply`` — re-embedding the changed chunks, the index rebuilt, the database
  vacuumed;
* ``rebuild-index`` on the same memory, beside them: what an index rebuild alone costs.

Printed: each command's median and spread over the rounds, the chunks changed, with the
load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_ui import _env, build  # noqa: E402
from tests.hygiene.corpus import Maker  # noqa: E402


def plant(memory: Path, n: int) -> int:
    """``n`` secrets appended to ``n`` chunks spread over the memory; chunks changed."""
    made = Maker(49)
    secrets = []
    while len(secrets) < n:
        secrets += [s for s in made.secrets() if s.value.startswith(("ghp_", "AKIA", "sk-", "xox"))]
    with closing(sqlite3.connect(memory / "memory.db")) as db:
        ids = [r[0] for r in db.execute("SELECT id FROM chunks ORDER BY id")]
        step = max(1, len(ids) // n)
        chosen = ids[::step][:n]
        db.executemany(
            "UPDATE chunks SET content = content || ' token ' || ? WHERE id = ?",
            [(s.value, i) for s, i in zip(secrets, chosen, strict=False)],
        )
        db.commit()
    return len(chosen)


def timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "memory_pipeline.cli", *args],
        env=env, cwd=cwd, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return time.perf_counter() - started, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", type=Path, default=Path(tempfile.gettempdir()) / "bench-ui")
    parser.add_argument("--model", default="", help="embedding model (default: the default)")
    parser.add_argument("--secrets", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    chunks = build(args.memory, args.model)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {
        "scrub (dry run)": [],
        "scrub --apply": [],
        "rebuild-index": [],
    }
    changed = found = 0
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="bench-scrub-") as tmp:
            work = Path(tmp) / "memory"
            shutil.copytree(args.memory, work, ignore=shutil.ignore_patterns("notes"))
            env = _env(work, args.model)
            changed = plant(work, args.secrets)
            seconds, out = timed(["scrub", "--json"], env, work)
            times["scrub (dry run)"].append(seconds)
            found = json.loads(out)["found"]
            times["scrub --apply"].append(timed(["scrub", "--apply", "--json"], env, work)[0])
            times["rebuild-index"].append(timed(["rebuild-index"], env, work)[0])
            assert json.loads(timed(["scrub", "--json"], env, work)[1])["found"] == 0
    load_after = os.getloadavg()
    print(f"memory: {chunks} chunks; model: {args.model or 'the default'}; {args.rounds} rounds")
    print(f"planted: {found} secrets in {changed} chunks")
    for name, values in times.items():
        print(
            f"  {name:<16} median {statistics.median(values):6.2f} s  "
            f"(min {min(values):.2f}, max {max(values):.2f})"
        )
    print(
        f"load average (1, 5, 15 min): before {load_before[0]:.2f} {load_before[1]:.2f} "
        f"{load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
