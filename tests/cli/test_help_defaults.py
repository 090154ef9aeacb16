"""Every default a ``--help`` names is the one the command uses.

The real parser (``build_parser``) is walked to every subcommand; each option whose help
says "default" has the text after it (up to ``)`` or ``;``) read for what it names: the
``HYBRID_RAG_*`` / ``MEMORY_PIPELINE_*`` variables, a path, numbers, a word. That is
compared with what the command really uses when the option is not given, in a controlled
environment (no such variables, HOME and the XDG folders in tmp_path, an empty working
folder): the parser's own default when it has one, else the value ``REAL`` takes from the
code the command runs (``commands._settings``, ``alert_log_path``, …). An option whose
help names a default that neither knows fails, so a new one cannot go unchecked.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memory_pipeline.alerts import LOG_ENV, alert_log_path
from memory_pipeline.cli import commands
from memory_pipeline.cli import evaluation as eval_cli
from memory_pipeline.cli.main import build_parser
from memory_pipeline.cli.sources import SOURCES_ENV
from memory_pipeline.config import Settings, variable
from memory_pipeline.evaluation.beir import default_eval_cache
from memory_pipeline.evaluation.variants import DEFAULT_VARIANTS
from memory_pipeline.spaces import SPACE_VARIABLE
from memory_pipeline.ui.runs import HOME_ENV as DAGSTER_HOME_ENV

#: A project's space (``spaces.project_space``: what its .mcp.json names, else its root's
#: marked name): the help can only describe it.
PROJECT_SPACE = object()
#: Options whose help says what happens by default rather than naming a value: the words.
BEHAVIOUR = {
    "search --now": "today",
    "backfill-source-date --apply": "only show them",
    "forget --dry-run": "only report",
    "scrub --dry-run": "only report",
    "sources sync paths": "every root",
    "eval --pooled": "a memory per conversation",
}
VARIABLE = re.compile(r"\b(?:HYBRID_RAG|MEMORY_PIPELINE)_[A-Z0-9_]+\b")
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


@dataclass(frozen=True)
class Real:
    """What a command uses when the option is not given: ``value`` (None: nothing to
    name, e.g. no sources file) and the variables that set it instead."""

    value: object = None
    variables: tuple[str, ...] = ()


def real_defaults() -> dict[str, Real]:
    """Option (``--flag``, or ``command --flag`` where a command differs) -> its real
    default, taken from the code the commands run, in the environment as it is now."""
    settings = commands._settings(build_parser().parse_args(["stats"]))  # every memory command's
    memory = settings.memory_params()  # search and forget: the weights not given
    limits = settings.forgetting.limits()  # forget: the limits not given
    ingest = Settings.from_env().ingest  # eval --locomo: the settings given no flag
    # eval with no --config runs DEFAULT_VARIANTS, which is what --config all means.
    assert eval_cli._configs("all") == list(DEFAULT_VARIANTS)
    real = {
        "--db": Real(settings.db_path, (variable("db_path"),)),
        "--index": Real(settings.index_path, (variable("index_path"),)),
        "--database-url": Real(None, (variable("database_url"),)),
        "--backend": Real(settings.index.backend, (variable("backend"),)),
        "--model": Real(settings.embedding.model, (variable("model"),)),
        "--space": Real(settings.space, (variable("space"),)),
        "--read-space": Real(settings.read_spaces, (variable("read_spaces"),)),
        # setup writes the project's space and no other into the server's entry, whatever
        # the environment it runs in says (cmd_setup: Settings(), not from_env).
        "setup --space": Real(PROJECT_SPACE),
        "setup --read-space": Real(Settings().read_spaces),
        # the hook: --space, else the environment's, else the payload's cwd (hook_space)
        "capture --space": Real(PROJECT_SPACE, (SPACE_VARIABLE,)),
        "health --sources": Real(None, (SOURCES_ENV,)),
        "sources status --sources": Real(None, (SOURCES_ENV,)),
        "sources sync --sources": Real(None, (SOURCES_ENV,)),
        "alerts --log": Real(alert_log_path(os.environ), (LOG_ENV, variable("index_path"))),
        "recall --budget": Real(settings.memory.recall_budget, (variable("recall_budget"),)),
        "eval --golden": Real(eval_cli.DEFAULT_GOLDEN),
        "eval --cache-dir": Real(default_eval_cache()),
        "eval --config": Real("all"),
        "eval --turn-context": Real(
            (ingest.turn_context_before, ingest.turn_context_after),
            (variable("turn_context_before"), variable("turn_context_after")),
        ),
        "eval --turn-dates": Real(ingest.turn_dates, (variable("turn_dates"),)),
        "eval --turn-vectors": Real(ingest.turn_vectors, (variable("turn_vectors"),)),
        "serve --tools": Real(settings.serving.tools),
        # the viewer's Dagster home: home_from(None) reads this variable
        "ui --dagster-home": Real(f"${DAGSTER_HOME_ENV}"),
    }
    for command in ("search", "forget"):
        for name in ("time_weight", "freq_weight", "importance_threshold"):
            flag = f"{command} --{name.replace('_', '-')}"
            real[flag] = Real(getattr(memory, name), (variable(name),))
    for name, value in limits.items():
        real[f"forget --{name.replace('_', '-')}"] = Real(value, (variable(name),))
    return real


def leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command a user can run (``sources status`` too), with its parser."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs and words:
        yield " ".join(words), parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaves(sub, (*words, name))


def stated(help_text: str, command: str) -> str | None:
    """What the help names as ``command``'s default: the text after "default" up to ``)``
    or ``;``, or the clause ``; command: …`` that follows it for that command (one help
    shared by every command); for ``core (…; the default)``, the word before the
    parenthesis. None: the help names no default."""
    found = re.search(r"\bdefault\b:?", help_text)
    if found is None:
        return None
    general, *clauses = help_text[found.end() :].split(")", 1)[0].split(";")
    for clause in clauses:
        commands_, colon, default = clause.strip().partition(": ")
        if colon and command in commands_.split(", "):
            return default.strip()
    if general.strip():
        return general.strip()
    before = help_text[: found.start()]
    return before[: before.rfind("(")].rsplit(":", 1)[-1].strip()


def names_value(text: str, value: object) -> bool:
    """Whether ``text`` names ``value``, as help writes it."""
    if value is PROJECT_SPACE:
        return ".mcp.json" in text and "root" in text
    if isinstance(value, Path):
        words = (w.strip("'\",") for w in text.split())
        paths = [Path(w) for w in words if "/" in w or Path(w).suffix]
        want = value if value.is_absolute() else Path(value)
        return any((p.expanduser() if value.is_absolute() else p) == want for p in paths)
    if isinstance(value, bool):
        return re.search(rf"\b{'on' if value else 'off'}\b", text) is not None
    if isinstance(value, int | float):
        value = [value]
    if isinstance(value, list | tuple) and value and all(isinstance(v, int | float) for v in value):
        return [float(n) for n in NUMBER.findall(text)] == [float(v) for v in value]
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value)) or "none"
    word = re.escape(str(value))
    return re.search(rf"(?<![\w.-]){word}(?![\w-])", text) is not None


def wrong_defaults() -> tuple[list[str], int]:
    """The options whose help names a default the command does not use, and how many
    stated defaults were checked."""
    real = real_defaults()
    wrong: list[str] = []
    checked = 0
    for command, parser in leaves(build_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.help or action.help == argparse.SUPPRESS:
                continue
            text = stated(formatter._expand_help(action), command)
            if text is None:
                continue
            longs = [o for o in action.option_strings if o.startswith("--")]
            flag = longs[0] if longs else action.dest
            key = f"{command} {flag}"
            checked += 1
            if key in BEHAVIOUR:
                if text != BEHAVIOUR[key]:
                    wrong.append(f"{key}: help says the default is {text!r}")
                continue
            spec = real.get(key) or real.get(flag)
            if spec is None and action.default not in (None, False, argparse.SUPPRESS):
                spec = Real(action.default)  # the parser's default is what the command gets
            if spec is None:
                wrong.append(f"{key}: help names a default ({text!r}) this test does not know")
                continue
            named = sorted(set(VARIABLE.findall(text)))
            if named != sorted(spec.variables):
                wrong.append(f"{key}: help names {named}, the default comes from {spec.variables}")
            if spec.value is not None and not names_value(text, spec.value):
                shown = "the project's space" if spec.value is PROJECT_SPACE else repr(spec.value)
                wrong.append(f"{key}: help says {text!r}, the command uses {shown}")
    return wrong, checked


@pytest.fixture
def controlled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No HYBRID_RAG_* / MEMORY_PIPELINE_* variable, HOME in tmp_path, an empty folder."""
    for key in list(os.environ):
        if key.startswith(("HYBRID_RAG_", "MEMORY_PIPELINE_", "XDG_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


@pytest.mark.parametrize("xdg", [True, False], ids=["xdg-folders", "home-folders"])
def test_every_default_the_help_names_is_the_real_one(
    controlled: Path, monkeypatch: pytest.MonkeyPatch, xdg: bool
) -> None:
    if xdg:
        monkeypatch.setenv("XDG_DATA_HOME", str(controlled / "data"))
        monkeypatch.setenv("XDG_CACHE_HOME", str(controlled / "cache"))
    wrong, checked = wrong_defaults()
    assert not wrong, "\n".join(wrong)
    assert checked > 100  # every command's storage flags and the rest: the walk saw them


def test_the_storage_defaults_are_the_data_folder(controlled: Path) -> None:
    """What `memory-pipeline import --help` says of --db and --index, in so many words."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in sub.choices["import"]._actions}
    memory = "~/.local/share/memory-pipeline"
    assert helps["db"] == f"SQLite file (default: HYBRID_RAG_DB_PATH, else {memory}/memory.db)"
    assert helps["index"] == f"index folder (default: HYBRID_RAG_INDEX_PATH, else {memory}/indices)"


def test_a_wrong_stated_default_is_caught(
    controlled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check itself: an option that states another default than it has fails it."""
    build = commands.build_parser

    def with_a_wrong_one() -> argparse.ArgumentParser:
        parser = build()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        stats = sub.choices["stats"]
        stats.add_argument("--top", type=int, default=7, help="rows (default 10)")
        stats.add_argument("--out", help="report file (default: report.json)")
        return parser

    monkeypatch.setattr("tests.cli.test_help_defaults.build_parser", with_a_wrong_one)
    wrong, _ = wrong_defaults()
    assert wrong == [
        "stats --top: help says '10', the command uses 7",
        "stats --out: help names a default ('report.json') this test does not know",
    ]
