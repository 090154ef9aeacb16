"""Does any text make the redaction step superlinear? Crafted texts at 1× and 4× size.

Each crafted text repeats one unit until it is ``--size`` characters long (and 4× that):
every keyword of every gitleaks rule followed by characters its secrets are made of, the
prefixes that stalled earlier patterns (``eyJ``, ``sk-ant-``, a PEM header, ``://a:``, …),
many distinct secrets in one text (an ``.env`` dump: the "found once, taken everywhere"
pass), and a run of token characters. Printed: the time of each at 1× and 4× (best of
``--repeat``, in CPU seconds of this process), their ratio (4 for linear growth), and the slowest at 4× size — with the
load average, since the machine may be shared.

    python bench/bench_redaction_growth.py [--size 262144] [--top 15]
"""

from __future__ import annotations

import argparse
import os
import random
import string
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_pipeline.hygiene import rule_set  # noqa: E402
from memory_pipeline.hygiene.redactor import Redactor  # noqa: E402

FILL = "aZ09_-+/=.bQ"
STALLERS = [
    "password_",
    "key ",
    "key" + " " * 50,
    "eyJ",
    "eyJabcdefgh-",
    "sk-ant-",
    "sk-proj-a",
    "pypi-AgEIcHlwaS5vcmc",
    "ACCOUNTKEY=",
    "-----BEGIN " + "PRIVATE KEY-----\n",  # written in two, or this file would hold one
    "PuTTY-User-Key-File-2: ",
    "://a:",
    "://:",
    "<private>",
    '\\"api_key\\": \\"',
    "AbcAbc",
    "the secret is ",
    "Authorization: Basic ",
    "?page_token=x&",
    "a1b2c3d4e5f6g7h8",
]


def units() -> dict[str, str]:
    found = {f"staller {u!r}": u for u in STALLERS}
    for rule in rule_set.gitleaks().rules:
        for keyword in rule.keywords[:1]:
            found[f"rule {rule.id}"] = keyword + FILL
    return found


def env_dump(size: int, seed: int = 0) -> str:
    """Distinct secrets, one a line, until ``size`` characters."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    lines, total, n = [], 0, 0
    while total < size:
        line = f"SERVICE_{n}_API_TOKEN={''.join(rng.choices(alphabet, k=32))}\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines)


def best(text: str, repeat: int) -> float:
    redactor = Redactor()
    times = []
    for _ in range(repeat):
        start = time.process_time()  # this process's CPU: less moved by a shared machine
        redactor.redact(text)
        times.append(time.process_time() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=256 * 1024, help="characters at 1×")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--top", type=int, default=15, help="rows to print, slowest first")
    args = parser.parse_args(argv)
    size = args.size
    texts = {name: (u * (size // len(u) + 1))[:size] for name, u in units().items()}
    load = os.getloadavg()[0]
    rows = []
    for name, small in texts.items():
        big = (small * 4)[: 4 * size]
        rows.append((name, best(small, args.repeat), best(big, args.repeat)))
    dump_small, dump_big = env_dump(size), env_dump(4 * size)
    rows.append((".env dump", best(dump_small, args.repeat), best(dump_big, args.repeat)))
    rows.sort(key=lambda r: -r[2])
    print(f"{len(rows)} crafted texts, {size:,} and {4 * size:,} characters (load {load:.2f})")
    print(f"{'text':<52} {'1x s':>7} {'4x s':>7} {'ratio':>6}")
    for name, one, four in rows[: args.top]:
        print(f"{name[:52]:<52} {one:7.3f} {four:7.3f} {four / max(one, 1e-9):6.2f}")
    worst_ratio = max(rows, key=lambda r: r[2] / max(r[1], 1e-4))
    print(f"highest ratio: {worst_ratio[0]} ({worst_ratio[2] / max(worst_ratio[1], 1e-4):.2f})")
    print(f"slowest at 4x: {rows[0][0]} {rows[0][2]:.3f} s (load now {os.getloadavg()[0]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
