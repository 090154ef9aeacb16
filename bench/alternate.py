"""Run ``make bench``'s scripts for two versions of the code, alternately, in one run.

The machine is shared and its load drifts: figures taken an hour apart say as much
about the neighbours as about a change. This runs each benchmark script for the base
(a git revision, checked out into a temporary worktree) and for this checkout, one
after the other, ``--rounds`` times in alternation, and prints every figure line of
the two side by side: ``base → this`` for each number that differs. A script the base
does not have yet is copied into its worktree, so a new benchmark measures the old code.

    python -m bench.alternate --base <rev> [--rounds 1] [--script bench/bench_core.py …]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ("bench/bench_core.py", "bench/bench_forgetting.py", "bench/bench_spaces.py")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def run(tree: Path, script: str) -> tuple[list[str], float]:
    """The script's printed lines, run from ``tree`` with ``tree`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, script], cwd=tree, env=env, capture_output=True, text=True, check=False
    )
    if out.returncode:
        sys.exit(f"{script} failed in {tree} (exit {out.returncode}):\n{out.stderr}")
    return out.stdout.splitlines(), time.perf_counter() - started


def side_by_side(base: list[str], this: list[str]) -> list[str]:
    """Lines of the same shape paired number by number; others shown as they are."""
    lines = []
    for b, t in zip(base, this, strict=False):
        if NUMBER.sub("#", b) != NUMBER.sub("#", t):
            lines += [f"  base: {b}", f"  this: {t}"]
            continue
        pieces, at = [], 0
        for mb, mt in zip(NUMBER.finditer(b), NUMBER.finditer(t), strict=True):
            pieces.append(t[at : mt.start()])
            same = mb.group() == mt.group()
            pieces.append(mt.group() if same else f"{mb.group()} → {mt.group()}")
            at = mt.end()
        lines.append("  " + "".join(pieces) + t[at:])
    if len(base) != len(this):
        lines.append(f"  (base printed {len(base)} lines, this {len(this)})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to compare against")
    parser.add_argument("--rounds", type=int, default=1, help="base/this pairs per script")
    parser.add_argument("--script", action="append", help=f"default: {', '.join(SCRIPTS)}")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    # Beside this checkout, so that what the scripts find beside it (the data sets) is there.
    base = Path(tempfile.mkdtemp(prefix=".bench-base-", dir=ROOT.parent))
    git = ["git", "-C", str(ROOT)]
    subprocess.run([*git, "worktree", "add", "-q", "--detach", str(base), args.base], check=True)
    try:
        for script in args.script or SCRIPTS:
            if not (base / script).exists():
                shutil.copy(ROOT / script, base / script)
                print(f"{script}: not in {args.base}; this checkout's copy runs there")
        for script in args.script or SCRIPTS:
            for n in range(args.rounds):
                # Alternate which goes first, so a drifting load favours neither.
                order = [base, ROOT] if n % 2 == 0 else [ROOT, base]
                ran = {tree: run(tree, script) for tree in order}
                (b, b_s), (t, t_s) = ran[base], ran[ROOT]
                went = "base first" if n % 2 == 0 else "this first"
                print(f"\n== {script}, round {n + 1} ({went}): base {b_s:.0f}s, this {t_s:.0f}s ==")
                print("\n".join(side_by_side(b, t)), flush=True)
    finally:
        subprocess.run([*git, "worktree", "remove", "--force", str(base)], check=True)
    load = os.getloadavg()
    print(f"\nload average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
