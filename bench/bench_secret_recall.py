"""How many of gitleaks' own samples the redaction step catches, in context and bare.

The samples (``tests/hygiene/data/gitleaks_samples.jsonl.gz``, made by
``bench/gitleaks_samples.py`` from gitleaks' rule files at a pinned commit) are the true
positives each gitleaks rule must find, most of them a secret written into ~25 contexts
(ini, JSON, YAML, Go, Java, make, …). Each goes through ``Redactor.redact``:

* **in context**: the sample as gitleaks wrote it;
* **bare**: its secret alone in a sentence of prose, no name beside it (generated samples
  only: they say what the secret is).

A sample is caught when no 8 characters in a row of its secret are left (for a written
sample, the secret is what its own rule finds in it). False positives are counted on
ordinary text: the Python standard library's sources, this repository, and a lockfile
shape (``"integrity": "sha512-…"``).

    python bench/bench_secret_recall.py [--misses N] [--json]
"""

from __future__ import annotations

import argparse
import base64
import gzip
import hashlib
import json
import sys
import sysconfig
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from memory_pipeline.hygiene import rule_set
from memory_pipeline.hygiene.redactor import Redactor

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests/hygiene/data/gitleaks_samples.jsonl.gz"
FALSE = ROOT / "tests/hygiene/data/gitleaks_fps.jsonl.gz"  # each rule's ``fps``
WINDOW = 8
BARE = "I used {} for the deploy yesterday."


@dataclass
class Sample:
    rule: str
    text: str
    secret: str | None


def load(path: Path = SAMPLES) -> list[Sample]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [Sample(**json.loads(line)) for line in f]


def secrets_of(sample: Sample) -> list[str]:
    """What must not be left of ``sample``: its secret, or what its own rule finds."""
    if sample.secret:
        return [sample.secret]
    rules = {r.id: r for r in rule_set.gitleaks().rules}
    rule = rules.get(sample.rule)
    if rule is None:
        return []
    one = rule_set.RuleSet((rule,), rule_set.gitleaks().allowlist)
    return [sample.text[h.start : h.end] for h in one.find(sample.text)]


def left(secret: str, text: str, around: str = "") -> bool:
    """Whether ``WINDOW`` characters in a row of ``secret`` are still in ``text`` — but for
    those the text around the secret holds anyway (``rubygems`` of ``rubygems_…`` in a name
    ``rubygemsToken``)."""
    width = min(WINDOW, len(secret))
    pieces = (secret[i : i + width] for i in range(len(secret) - width + 1))
    return any(p in text and p not in around for p in pieces)


@dataclass
class Tally:
    caught: int = 0
    total: int = 0
    missed: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, rule: str, ok: bool, example: str) -> None:
        self.total += 1
        self.caught += ok
        if not ok:
            self.missed[rule] += 1
            self.examples.setdefault(rule, example)

    @property
    def share(self) -> float:
        return self.caught / self.total if self.total else 0.0


def measure(samples: list[Sample], redactor: Redactor) -> tuple[Tally, Tally, int]:
    context, bare = Tally(), Tally()
    unjudged = 0
    for sample in samples:
        secrets = secrets_of(sample)
        if not secrets:
            unjudged += 1  # a rule the bundled set does not hold (a path rule, a renamed one)
            continue
        kept = redactor.redact(sample.text).text
        around = [sample.text.replace(s, " ") for s in secrets]
        caught = not any(left(s, kept, a) for s, a in zip(secrets, around, strict=True))
        context.add(sample.rule, caught, sample.text)
        if sample.secret:
            sentence = BARE.format(sample.secret)
            kept = redactor.redact(sentence).text
            bare.add(sample.rule, not left(sample.secret, kept), sentence)
    return context, bare, unjudged


def false_positives(redactor: Redactor) -> dict[str, Counter[str]]:
    """What ordinary text loses: kinds found in the standard library, this repository's code
    and docs, and a lockfile's integrity lines."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    corpora = {
        "python stdlib": sorted(p for p in stdlib.rglob("*.py") if "site-packages" not in p.parts),
        "this repository": sorted(
            p
            for folder in ("memory_pipeline", "serving", "docs", "tests", "bench")
            for p in (ROOT / folder).rglob("*")
            if p.suffix in (".py", ".md") and "hygiene" not in p.parts
        ),
    }
    found: dict[str, Counter[str]] = {}
    lockfile = redactor.redact(_lockfile()).counts
    found["a package-lock.json of 500 packages"] = lockfile
    for name, paths in corpora.items():
        counts: Counter[str] = Counter()
        for path in paths:
            counts += redactor.redact(path.read_text(encoding="utf-8", errors="replace")).counts
        counts.pop("private", None)
        counts.pop("memory-recall", None)
        found[f"{name} ({len(paths)} files)"] = counts
    return found


def _lockfile(n: int = 500) -> str:
    """An npm lockfile's shape: each package with its version, address and SRI integrity."""
    entries = {}
    for i in range(n):
        digest = base64.b64encode(hashlib.sha512(str(i).encode()).digest()).decode()
        entries[f"node_modules/pkg-{i}"] = {
            "version": f"1.{i}.0",
            "resolved": f"https://registry.npmjs.org/pkg-{i}/-/pkg-{i}-1.{i}.0.tgz",
            "integrity": f"sha512-{digest}",
        }
    return json.dumps({"lockfileVersion": 3, "packages": entries}, indent=2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--misses", type=int, default=15, help="rules with misses to list")
    parser.add_argument("--no-fp", action="store_true", help="skip the false-positive corpora")
    args = parser.parse_args(argv)
    redactor = Redactor()
    samples = load()
    context, bare, unjudged = measure(samples, redactor)
    print(f"gitleaks samples: {len(samples)} of {len({s.rule for s in samples})} rules")
    print(f"  in context: {context.caught}/{context.total} caught = {context.share:.3f}")
    print(f"  bare:       {bare.caught}/{bare.total} caught = {bare.share:.3f}")
    print(f"  not judged (rule not in the bundled set): {unjudged}")
    for title, tally in (("in context", context), ("bare", bare)):
        print(f"most missed, {title}:")
        for rule, n in tally.missed.most_common(args.misses):
            example = tally.examples[rule].replace("\n", "\\n")[:110]
            print(f"  {rule:<40} {n:>4}  {example}")
    if not args.no_fp:
        fps = load(FALSE)
        changed: Counter[str] = Counter()
        for sample in fps:
            changed.update(redactor.redact(sample.text).counts)
        flagged = sum(redactor.redact(s.text).changed for s in fps)
        alone = sum(bool(next(rule_set.gitleaks().find(s.text), None)) for s in fps)
        print(
            f"gitleaks' own false positives (each rule's fps): {flagged} of {len(fps)} changed"
            f" (the bundled rules alone: {alone}); by kind {dict(changed.most_common(8))}"
        )
        print("false positives (kinds found in ordinary text):")
        for name, counts in false_positives(redactor).items():
            print(f"  {name}: {sum(counts.values())} {dict(counts.most_common(8))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
