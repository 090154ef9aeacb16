"""``cli-reference``: a command line's reference, walked from its argparse parser.

    ```{cli-reference} memory_pipeline.cli.commands:build_parser
    ```

The argument names a function that returns the parser. With ``:calls-parse-args:``
it names a function that builds a parser and parses at once (``serving.__main__``'s
``parse_args``); the parser is then taken at its ``parse_args`` call, before it parses.
Options that the most leaf commands take alike (argparse's ``parents``: the same flags and
help) are listed once, before the commands; a command without them (``serve``, whose
options are the server's own) lists all of its own.
"""

from __future__ import annotations

import argparse
import importlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, ClassVar
from unittest import mock

from docnodes import code, inline, literal, paragraphs, section, table
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

WIDTH = 80


class _Taken(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def load_parser(spec: str, *, calls_parse_args: bool = False) -> argparse.ArgumentParser:
    module, _, name = spec.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    if not calls_parse_args:
        parser = fn()
        if not isinstance(parser, argparse.ArgumentParser):
            raise TypeError(f"{spec} returned {type(parser).__name__}, not an ArgumentParser")
        return parser

    def take(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Taken(self)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", take):
        try:
            fn([])
        except _Taken as taken:
            return taken.parser
    raise RuntimeError(f"{spec} never called parse_args")


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str | None, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name), sub


def leaves(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    subs = list(subcommands(parser))
    if not subs:
        yield parser
    for _, _, sub in subs:
        yield from leaves(sub)


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def key(action: argparse.Action) -> tuple[str, ...]:
    return tuple(action.option_strings) or (action.dest,)


def _options(parser: argparse.ArgumentParser) -> set[tuple[tuple[str, ...], str | None]]:
    return {(key(a), a.help) for a in arguments(parser) if a.option_strings}


def shared_options(parser: argparse.ArgumentParser) -> set[tuple[str, ...]]:
    """Options the most leaf commands take alike (argparse's ``parents``), to list once."""
    counts = Counter(o for p in leaves(parser) for o in _options(p))
    most = max(counts.values(), default=0)
    if most < 2:
        return set()
    return {k for (k, _), n in counts.items() if n == most}


def takes_shared(leaf: argparse.ArgumentParser, shared: set[tuple[str, ...]]) -> bool:
    return bool(shared) and shared <= {key(a) for a in arguments(leaf)}


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    return parser._get_formatter()._expand_help(action)


def _value(action: argparse.Action) -> nodes.Node | str:
    if action.nargs == 0:
        return ""
    if action.choices is not None:
        return inline(*(code(str(c)) for c in action.choices), sep=" | ")
    if action.metavar:
        return code(str(action.metavar))
    kind = getattr(action.type, "__name__", None) if action.type else None
    return code(kind or action.dest.upper())


def _default(action: argparse.Action) -> nodes.Node | str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    return code(repr(action.default) if isinstance(action.default, str) else str(action.default))


def _repeat(action: argparse.Action) -> str:
    if isinstance(action, argparse._AppendAction):
        return " (repeatable)"
    if action.nargs in ("+", "*"):
        return " (one or more)" if action.nargs == "+" else " (any number)"
    return ""


def argument_table(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> nodes.table:
    rows = []
    for action in actions:
        name = inline(*(code(s) for s in key(action)))
        if _repeat(action):
            name += nodes.Text(_repeat(action))
        rows.append([name, _value(action), _default(action), _help(parser, action)])
    return table(["argument", "value", "default", "meaning"], rows)


def command_sections(
    parser: argparse.ArgumentParser, shared: set[tuple[str, ...]], path: list[str]
) -> Iterator[nodes.section]:
    for name, helptext, sub in subcommands(parser):
        full = [*path, name]
        sec = section(" ".join(full), "cmd-" + "-".join(full), literal_title=True)
        sec += paragraphs(sub.description or helptext)
        sec += literal(usage(sub), "text")
        common = takes_shared(sub, shared)
        own = [a for a in arguments(sub) if not (common and key(a) in shared)]
        if own:
            sec += argument_table(sub, own)
        if common and not list(subcommands(sub)):
            sec += nodes.paragraph("", "It takes the common options too.")
        sec += paragraphs(sub.epilog)
        sec += list(command_sections(sub, shared, full))
        yield sec


class CliReference(SphinxDirective):
    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {"calls-parse-args": directives.flag}

    def run(self) -> list[nodes.Node]:
        parser = load_parser(self.arguments[0], calls_parse_args="calls-parse-args" in self.options)
        shared = shared_options(parser)
        out: list[nodes.Node] = [*paragraphs(parser.description), literal(usage(parser), "text")]
        top = [a for a in arguments(parser)]
        if top:
            out.append(argument_table(parser, top))
        out += paragraphs(parser.epilog)
        if shared:
            leaf = next(p for p in leaves(parser) if takes_shared(p, shared))
            common = [a for a in arguments(leaf) if key(a) in shared]
            sec = section("Common options", f"{parser.prog}-common-options")
            sec += nodes.paragraph("", "Every command below takes these options.")
            sec += argument_table(leaf, common)
            out.append(sec)
        out += command_sections(parser, shared, [parser.prog])
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("cli-reference", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
