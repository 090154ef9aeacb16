"""Extract the true-positive samples of gitleaks' rules from its Go source.

gitleaks keeps, beside each rule (``cmd/generate/config/rules/*.go``), the samples the rule
must find (``tps``), many generated: ``utils.GenerateSampleSecrets(id, secret)`` writes one
secret into about 25 contexts (ini, JSON, YAML, Go, Java, make, …) and
``secrets.NewSecret(regex)`` draws a random string of a regex. This script reads those files
at a pinned commit and evaluates the few Go expressions they use, drawing the random parts
from a seeded generator, so the samples are the same on every run.

Each sample is written as one JSON line: the rule id, the text, and — for a generated
sample — the secret alone (what "bare" recall puts in a sentence of its own).

    python bench/gitleaks_samples.py GITLEAKS_GIT_DIR > samples.jsonl

The samples in ``tests/hygiene/data/gitleaks_samples.jsonl.gz`` were made so (gitleaks is
MIT-licensed: ``memory_pipeline/hygiene/rules/LICENSE.gitleaks``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

#: The gitleaks commit the bundled rules and samples were read at (rules/README.md).
COMMIT = "b58d3f102cf3a2c84cb7f923d05c25c9b1aed84b"
RULES_DIR = "cmd/generate/config/rules"
GENERATE_GO = "cmd/generate/config/utils/generate.go"


# --------------------------------------------------------------- a random string of a regex
class Draw:
    """``secrets.NewSecret``: a string the regex matches (reggen with limit 1: an unbounded
    repeat adds at most one more)."""

    PRINTABLE = tuple(chr(c) for c in range(0x21, 0x7F))

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def __call__(self, regex: str) -> str:
        return "".join(self._items(sre_parse.parse(regex)))

    def _items(self, items: Any) -> list[str]:
        out: list[str] = []
        for op, arg in items:
            out += self._item(str(op), arg)
        return out

    def _set(self, arg: Any) -> list[str]:
        chars: list[str] = []
        negate = False
        for op, value in arg:
            op = str(op)
            if op == "NEGATE":
                negate = True
            elif op == "LITERAL":
                chars.append(chr(value))
            elif op == "RANGE":
                chars += [chr(c) for c in range(value[0], value[1] + 1)]
            elif op == "CATEGORY":
                chars += _CATEGORIES[str(value)]
        if negate:
            chars = [c for c in self.PRINTABLE if c not in chars]
        return chars

    def _item(self, op: str, arg: Any) -> list[str]:
        if op == "LITERAL":
            return [chr(arg)]
        if op == "NOT_LITERAL":
            return [self.rng.choice([c for c in self.PRINTABLE if c != chr(arg)])]
        if op == "ANY":
            return [self.rng.choice(self.PRINTABLE)]
        if op == "IN":
            return [self.rng.choice(self._set(arg))]
        if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            high = low + 1 if high == sre_parse.MAXREPEAT else high
            return [c for _ in range(self.rng.randint(low, high)) for c in self._items(sub)]
        if op == "SUBPATTERN":
            return self._items(arg[-1])
        if op == "BRANCH":
            return self._items(self.rng.choice(arg[1]))
        if op == "CATEGORY":
            return [self.rng.choice(_CATEGORIES[str(arg)])]
        return []  # AT (anchors), lookarounds: nothing to draw


_DIGITS = [chr(c) for c in range(48, 58)]
_WORD = _DIGITS + [chr(c) for c in range(65, 91)] + [chr(c) for c in range(97, 123)] + ["_"]
_CATEGORIES = {
    "CATEGORY_DIGIT": _DIGITS,
    "CATEGORY_WORD": _WORD,
    "CATEGORY_SPACE": [" "],
    "CATEGORY_NOT_DIGIT": [c for c in _WORD if c not in _DIGITS],
    "CATEGORY_NOT_WORD": list("-.:/ "),
    "CATEGORY_NOT_SPACE": _WORD,
}


# ----------------------------------------------------------------------- Go expressions
_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*[\s\S]*?\*/)
    |(?P<raw>`[^`]*`)
    |(?P<str>"(?:[^"\\\n]|\\.)*")
    |(?P<rune>'(?:[^'\\\n]|\\.)*')
    |(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
    |(?P<num>[0-9]+)
    |(?P<op>\.\.\.|:=|\[\]|[-+*/=(){}\[\],:;.<>!&|])
    |(?P<space>\s+)""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str


def tokens(source: str) -> list[Tok]:
    out = []
    for m in _TOKEN.finditer(source):
        kind = m.lastgroup or ""
        if kind in ("comment", "space"):
            continue
        out.append(Tok(kind, m.group()))
    return out


def _go_string(tok: Tok) -> str:
    if tok.kind == "raw":
        return tok.text[1:-1]
    return json.loads(tok.text) if "\\x" not in tok.text else _unescape(tok.text[1:-1])


def _unescape(body: str) -> str:
    return body.encode("latin-1", "backslashreplace").decode("unicode_escape")


class Unknown(Exception):
    """An expression this evaluator does not know: its sample is counted as not extracted."""


@dataclass
class Sample:
    rule: str
    text: str
    secret: str | None = None


class Evaluator:
    def __init__(self, toks: list[Tok], draw: Draw, contexts: list[str]) -> None:
        self.toks, self.draw, self.contexts = toks, draw, contexts
        self.at = 0
        self.env: dict[str, Any] = {}

    def peek(self, k: int = 0) -> Tok | None:
        i = self.at + k
        return self.toks[i] if i < len(self.toks) else None

    def take(self, text: str | None = None) -> Tok:
        tok = self.toks[self.at]
        if text is not None and tok.text != text:
            raise Unknown(f"expected {text!r}, got {tok.text!r}")
        self.at += 1
        return tok

    # expr := term ('+' term)*
    def expr(self) -> Any:
        value = self.term()
        while (t := self.peek()) is not None and t.text == "+":
            self.take()
            right = self.term()
            if not (isinstance(value, str) and isinstance(right, str)):
                raise Unknown("+ of non-strings")
            value += right
        return value

    def _items(self, close: str) -> list[Any]:
        items: list[Any] = []
        while (t := self.peek()) is not None and t.text != close:
            try:
                item = self.expr()
            except Unknown:
                item = _SKIPPED
                self._skip_to((",", close))
            if (t := self.peek()) is not None and t.text == ":":  # a map's key
                self.take()
                try:
                    item = self.expr()
                except Unknown:
                    item = _SKIPPED
                    self._skip_to((",", close))
            if (t := self.peek()) is not None and t.text == "...":
                self.take()
                item = _Spread(item)
            items.append(item)
            if (t := self.peek()) is not None and t.text == ",":
                self.take()
        self.take(close)
        return items

    def _skip_to(self, stops: tuple[str, ...]) -> None:
        depth = 0
        while (t := self.peek()) is not None:
            if depth == 0 and t.text in stops:
                return
            if t.text in "({[":
                depth += 1
            elif t.text in ")}]":
                if depth == 0:
                    return
                depth -= 1
            self.take()

    def term(self) -> Any:
        tok = self.take()
        if tok.kind in ("str", "raw"):
            return _go_string(tok)
        if tok.text == "[]" and self.peek() and self.peek().text == "string":  # type: ignore[union-attr]
            self.take()
            self.take("{")
            return _flatten(self._items("}"))
        if tok.kind == "name" and tok.text == "map":
            self._skip_to(("{",))
            self.take("{")
            return _flatten(self._items("}"))
        if tok.kind == "name":
            if (t := self.peek()) is not None and t.text == "(":
                self.take()
                return self.call(tok.text, self._items(")"))
            if tok.text in self.env:
                return self.env[tok.text]
        raise Unknown(tok.text)

    def call(self, name: str, args: list[Any]) -> Any:
        if any(a is _SKIPPED for a in args):
            raise Unknown(f"{name} of an unknown argument")
        flat = _flatten(args) if name == "append" else args
        if name == "append":
            return flat
        if name == "secrets.NewSecret":
            return self.draw(args[0])
        if name in _PATTERNS:
            return _PATTERNS[name](*args)
        if name == "utils.GenerateSampleSecret":
            return Sample("", f'{args[0]}_api_token = "{args[1]}"', args[1])
        if name == "utils.GenerateSampleSecrets":
            ident, secret = args
            fill = {"{i}": ident, "{I}": ident.upper(), "{s}": secret}
            texts = [re.sub(r"\{[iIs]\}", lambda m: fill[m.group()], c) for c in self.contexts]
            return [Sample("", t, secret) for t in texts]
        if name == "fmt.Sprintf" and all(isinstance(a, str) for a in args):
            return args[0].replace("%%", "\0") % tuple(args[1:]) if args[1:] else args[0]
        if name == "strings.Repeat":
            return args[0] * int(args[1])
        raise Unknown(name)

    def run(self) -> None:
        """Each ``name := expr`` / ``name = expr`` of the function, in order."""
        while (tok := self.peek()) is not None:
            nxt = self.peek(1)
            if tok.kind == "name" and nxt is not None and nxt.text in (":=", "="):
                self.at += 2
                start = self.at
                try:
                    self.env[tok.text] = self.expr()
                except (Unknown, IndexError, TypeError, ValueError):
                    self.env.pop(tok.text, None)
                    self.at = start + 1
                continue
            self.at += 1


class _Spread:
    def __init__(self, value: Any) -> None:
        self.value = value


_SKIPPED = object()


def _flatten(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, _Spread):
            out += item.value if isinstance(item.value, list) else [item.value]
        elif item is not _SKIPPED:
            out.append(item)
    return out


_PATTERNS = {
    "utils.Numeric": lambda n: f"[0-9]{{{n}}}",
    "utils.Hex": lambda n: f"[a-f0-9]{{{n}}}",
    "utils.AlphaNumeric": lambda n: f"[a-z0-9]{{{n}}}",
    "utils.AlphaNumericExtendedShort": lambda n: f"[a-z0-9_-]{{{n}}}",
    "utils.AlphaNumericExtended": lambda n: f"[a-z0-9=_\\-]{{{n}}}",
    "utils.AlphaNumericExtendedLong": lambda n: f"[a-z0-9\\/=_\\+\\-]{{{n}}}",
    "utils.Hex8_4_4_4_12": lambda: "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
}


def contexts(generate_go: str) -> list[str]:
    """The sample contexts of ``GenerateSampleSecrets``, as generate.go lists them (the
    entries not commented out)."""
    body = generate_go.split("samples := map[string]string{", 1)[1].split("\n\t}", 1)[0]
    found = []
    for tok_pair in re.finditer(
        r"^\s*(\"[^\n]*?\"|`[^`]*`):\s*(\"(?:[^\"\\\n]|\\.)*\"|`[^`]*`),", body, re.M
    ):
        found.append(_go_string(tokens(tok_pair.group(2))[0]))
    return found


_FUNC = re.compile(r"^func ", re.M)


def samples_of_file(
    source: str, draw: Draw, ctx: list[str]
) -> tuple[list[Sample], list[Sample], int]:
    """The true and the false positives of one rule file's rules (``tps``, ``fps``), and
    how many rules' ``tps`` could not be evaluated."""
    out: list[Sample] = []
    fps: list[Sample] = []
    missed = 0
    for body in _FUNC.split(source)[1:]:
        rule = re.search(r'RuleID:\s*"([^"]+)"', body)
        if rule is None or "tps" not in body:
            continue
        ev = Evaluator(tokens(body), draw, ctx)
        ev.run()
        tps = ev.env.get("tps")
        for item in _listed(ev.env.get("fps")):
            text = item.text if isinstance(item, Sample) else item
            if isinstance(text, str):
                fps.append(Sample(rule.group(1), text))
        if tps is None:
            missed += 1
            continue
        for item in tps if isinstance(tps, list) else [tps]:
            if isinstance(item, Sample):
                out.append(Sample(rule.group(1), item.text, item.secret))
            elif isinstance(item, str):
                out.append(Sample(rule.group(1), item))
    return out, fps, missed


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def git_show(git_dir: Path, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def extract(
    git_dir: Path, commit: str = COMMIT, seed: int = 0
) -> tuple[list[Sample], list[Sample], int]:
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "--name-only", commit, f"{RULES_DIR}/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    ctx = contexts(git_show(git_dir, commit, GENERATE_GO))
    draw = Draw(seed)
    samples: list[Sample] = []
    false: list[Sample] = []
    missed = 0
    for path in sorted(listing):
        if not path.endswith(".go") or path.endswith("_test.go"):
            continue
        got, fps, miss = samples_of_file(git_show(git_dir, commit, path), draw, ctx)
        samples += got
        false += fps
        missed += miss
    return samples, false, missed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, help="a clone of gitleaks (its .git folder)")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write .jsonl or .jsonl.gz here (else stdout)")
    parser.add_argument("--fps-out", type=Path, help="the false positives (fps), likewise")
    args = parser.parse_args(argv)
    samples, false, missed = extract(args.git_dir, args.commit, args.seed)
    write(samples, args.out)
    if args.fps_out is not None:
        write(false, args.fps_out)
    rules = len({s.rule for s in samples})
    print(
        f"{len(samples)} samples of {rules} rules, {len(false)} false positives; "
        f"{missed} functions not read",
        file=sys.stderr,
    )
    return 0


def write(samples: list[Sample], out: Path | None) -> None:
    lines = "".join(
        json.dumps({"rule": s.rule, "text": s.text, "secret": s.secret}, ensure_ascii=False) + "\n"
        for s in samples
    )
    if out is None:
        sys.stdout.write(lines)
    elif out.suffix == ".gz":
        out.write_bytes(gzip.compress(lines.encode(), mtime=0))
    else:
        out.write_text(lines)


if __name__ == "__main__":
    raise SystemExit(main())
