"""gitleaks' rule set, run as gitleaks runs it (docs/hygiene.md, "Secrets").

The rules are data: ``rules/gitleaks.toml`` is gitleaks' own default configuration (MIT,
``rules/LICENSE.gitleaks``; the commit it was read at is in ``rules/README.md``), loaded as
it is. Each rule has a regex (RE2 syntax), keywords that gate it (a text holding none of
them is not searched by it), an entropy floor for what it finds, and allowlists; the secret
is the rule's ``secretGroup``, else its first capture group that matched, else the whole
match — as gitleaks' ``detect.go`` takes it.

The regexes run on RE2 (``google-re2``): time linear in the text, whatever the text.
Left out: rules that judge a file's path only (the memory reads text, not paths), and an
allowlist that needs a path to hold (``condition = "AND"`` with ``paths``): with no path it
never holds, so what it would spare is taken, as for any other finding.
"""

from __future__ import annotations

import contextlib
import math
import re
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import ahocorasick
import re2

#: How far around a finding its line is read, each way, for an allowlist that judges the
#: line: a bound, so that many findings on one long line cost linear time.
LINE_REACH = 1000


_C_LOG_C = [0.0] + [c * math.log2(c) for c in range(1, 1025)]


def _c_log_c(c: int) -> float:
    return _C_LOG_C[c] if c <= 1024 else c * math.log2(c)


def entropy(value: str) -> float:
    """Shannon entropy in bits per character (gitleaks' ``shannonEntropy``), as
    log2(n) - sum(c log2 c) / n over each character's count c: one table lookup a count."""
    n = len(value)
    if not n:
        return 0.0
    return math.log2(n) - sum(map(_c_log_c, map(value.count, set(value)))) / n


class Regex:
    """One regex on two engines: Python's for a short target (a call from Python costs a
    third of RE2's), RE2 for a longer one (linear time whatever the regex and the target;
    on a short one Python's time is bounded by its length). A long alternation (gitleaks'
    catch-all allowlist) stays on RE2: Python's engine tries its branches one by one."""

    SHORT = 256
    SIMPLE = 400  # the longest regex Python's engine is given

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.linear = re2.compile(pattern)
        self.short: re.Pattern[str] | None = None
        if len(pattern) <= self.SIMPLE:
            with contextlib.suppress(re.error):  # RE2 syntax Python's lacks: RE2 alone
                self.short = re.compile(_python(pattern), re.ASCII)

    def search(self, target: str) -> bool:
        if self.short is not None and len(target) <= self.SHORT:
            return self.short.search(target) is not None
        return self.linear.search(target) is not None


def _python(pattern: str) -> str:
    """An RE2 regex in Python's syntax: a leading ``(?i)`` scoped to its group (Python takes
    global flags only at the very start), ``\\z`` as ``\\Z``."""
    return _python_scoped(pattern).replace("\\z", "\\Z")


class Words:
    """Whether a text holds any of many words: one pass of an Aho-Corasick automaton."""

    def __init__(self, words: Iterable[str]) -> None:
        self.automaton = ahocorasick.Automaton()
        for word in words:
            self.automaton.add_word(word, word)
        self.automaton.make_automaton()

    def found(self, text: str) -> set[str]:
        """The words ``text`` holds."""
        return {word for _, word in self.automaton.iter(text)}

    def any_in(self, text: str) -> bool:
        return next(self.automaton.iter(text), None) is not None


@dataclass(frozen=True, slots=True)
class Allowlist:
    """What a rule (or every rule) does not take: a finding whose target (its secret, the
    whole match or its line) one of ``regexes`` finds, or whose secret holds a stopword."""

    regexes: Regex | None = None  # what finds what any of the list's regexes finds
    stopwords: Words | None = None  # its stopwords, lowercase
    target: str = "secret"  # secret | match | line
    # AND: every kind of check given must hold (a path one never does, here)
    every: bool = False
    needs_path: bool = False

    @classmethod
    def from_toml(cls, table: dict[str, Any]) -> Allowlist:
        return cls(
            regexes=_one_of(table.get("regexes", ())),
            stopwords=_any_of(table.get("stopwords", ())),
            target=table.get("regexTarget", "secret"),
            every=table.get("condition", "OR").upper() == "AND",
            needs_path=bool(table.get("paths") or table.get("commits")),
        )

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"match": match, "line": line}.get(self.target, secret)
        by_regex = self.regexes is not None and self.regexes.search(target)
        by_word = self.stopwords is not None and self.stopwords.any_in(secret.lower())
        if not self.every:
            return by_regex or by_word
        if self.needs_path:
            return False
        checks = [by_regex] if self.regexes is not None else []
        checks += [by_word] if self.stopwords is not None else []
        return bool(checks) and all(checks)


@dataclass(frozen=True, slots=True)
class SetRule:
    id: str
    pattern: Any  # an RE2 pattern
    keywords: tuple[str, ...]  # lowercase
    secret_group: int = 0
    entropy: float = 0.0
    allowlists: tuple[Allowlist, ...] = ()

    @classmethod
    def from_toml(cls, table: dict[str, Any]) -> SetRule:
        return cls(
            id=table["id"],
            pattern=re2.compile(table["regex"]),
            keywords=tuple(k.lower() for k in table.get("keywords", ())),
            secret_group=int(table.get("secretGroup", 0)),
            entropy=float(table.get("entropy", 0.0)),
            allowlists=tuple(Allowlist.from_toml(a) for a in table.get("allowlists", ())),
        )

    def secret_span(self, match: Any) -> tuple[int, int]:
        """Where the secret is in ``match``: gitleaks' choice of group."""
        groups = match.re.groups
        if groups and self.secret_group and self.secret_group <= groups:
            return match.span(self.secret_group)
        for g in range(1, groups + 1):
            start, end = match.span(g)
            if start >= 0 and end > start:
                return start, end
        return match.span()


@dataclass(frozen=True, slots=True)
class Hit:
    rule: str
    start: int  # the secret's span
    end: int
    match_start: int  # where the rule's whole match starts (a name before the secret)


@dataclass(frozen=True, eq=False)  # one set is one object: its indexes are cached by it
class RuleSet:
    rules: tuple[SetRule, ...]
    allowlist: Allowlist  # the global one

    @property
    def keywords(self) -> frozenset[str]:
        return frozenset(k for rule in self.rules for k in rule.keywords)

    def present(self, lowered: str) -> set[str]:
        """The rules' keywords a lowercased text holds."""
        return _keywords(self).found(lowered)

    def find(
        self,
        text: str,
        present: frozenset[str] | set[str] | None = None,
        taken: frozenset[tuple[int, int]] | set[tuple[int, int]] = frozenset(),
    ) -> Iterator[Hit]:
        """Every finding of every rule in ``text``, in rule order. ``present``: the keywords
        ``text`` holds, if the caller has looked them up already (lowercase); ``taken``:
        spans found already, not judged again (a ``.env`` dump's every line)."""
        if present is None:
            present = self.present(text.lower())
        woken = _woken(self, frozenset(present))
        for rule in self.rules:
            if rule.keywords and rule.id not in woken:
                continue
            for match in rule.pattern.finditer(text):
                start, end = rule.secret_span(match)
                if end <= start or (start, end) in taken:
                    continue
                secret = text[start:end]
                if rule.entropy and entropy(secret) <= rule.entropy:
                    continue
                whole = match.group()
                line = _line(text, *match.span())
                lists = (self.allowlist, *rule.allowlists)
                if any(a.allows(secret, whole, line) for a in lists):
                    continue
                yield Hit(rule.id, start, end, match.start())


def _one_of(regexes: Iterable[str]) -> Regex | None:
    """The alternation of ``regexes`` (each in a group of its own, so its flags stay its
    own): one search of a target instead of one a regex."""
    regexes = list(regexes)
    return Regex("|".join(f"(?:{_python_scoped(r)})" for r in regexes)) if regexes else None


def _python_scoped(pattern: str) -> str:
    """``pattern`` with a leading ``(?i)`` made a group's own flag (RE2 reads both)."""
    return f"(?i:{pattern[4:]})" if pattern.startswith("(?i)") else pattern


def _any_of(words: Iterable[str]) -> Words | None:
    """Any of ``words`` (lowercase) in a lowercased text, in one pass however many words a
    rule has (gitleaks' catch-all: 1,400)."""
    lowered = {w.lower() for w in words}
    return Words(sorted(lowered)) if lowered else None


def _line(text: str, start: int, end: int) -> str:
    """The line(s) of ``text[start:end]``, at most ``LINE_REACH`` characters each way."""
    left = text.rfind("\n", max(0, start - LINE_REACH), start) + 1 or max(0, start - LINE_REACH)
    right = text.find("\n", end, end + LINE_REACH)
    return text[left : right if right >= 0 else min(len(text), end + LINE_REACH)]


def _load(data: bytes) -> RuleSet:
    config = tomllib.loads(data.decode())
    rules = tuple(SetRule.from_toml(r) for r in config["rules"] if "regex" in r)
    return RuleSet(rules, Allowlist.from_toml(config.get("allowlist", {})))


@cache
def _by_keyword(rules: RuleSet) -> dict[str, frozenset[str]]:
    """Each keyword → the ids of the rules it wakes."""
    woken: dict[str, set[str]] = {}
    for rule in rules.rules:
        for keyword in rule.keywords:
            woken.setdefault(keyword, set()).add(rule.id)
    return {k: frozenset(ids) for k, ids in woken.items()}


def _woken(rules: RuleSet, present: frozenset[str]) -> set[str]:
    """The ids of the rules that the keywords ``present`` wake."""
    index = _by_keyword(rules)
    return {rule for k in present if k in index for rule in index[k]}


@cache
def _keywords(rules: RuleSet) -> Words:
    return Words(sorted(rules.keywords))


@cache
def gitleaks() -> RuleSet:
    """The bundled gitleaks rule set, loaded once."""
    data = resources.files("memory_pipeline.hygiene").joinpath("rules/gitleaks.toml")
    return _load(data.read_bytes())
