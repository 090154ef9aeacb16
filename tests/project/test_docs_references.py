"""The site's generated references cover everything the code defines.

The generators in ``docs/_ext/`` walk the argparse parser, the MCP server's
``tools/list`` and the Dagster ``Definitions``; here their output is compared with the
code's own lists, so a command, a tool or an asset cannot be left off the site.
``make docs`` then renders what these functions return.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from docutils import nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "_ext"))

import cli_reference
import dagster_reference
import mcp_reference
import results_charts

from memory_pipeline.cli.main import build_parser
from serving.server import TOOLS


def titles(sections: list[nodes.section]) -> list[str]:
    found = []
    for sec in sections:
        found += [t.astext() for t in sec.findall(nodes.title)]
    return found


def test_every_cli_command_has_a_section_with_every_own_argument() -> None:
    parser = build_parser()
    shared = cli_reference.shared_options(parser)
    sections = list(cli_reference.command_sections(parser, shared, [parser.prog]))
    shown = titles(sections)
    names = [name for name, _, _ in cli_reference.subcommands(parser)]
    assert {"ingest", "search", "health", "forget", "sources", "eval", "demo", "serve"} <= set(
        names
    )
    for name, _, sub in cli_reference.subcommands(parser):
        assert f"memory-pipeline {name}" in shown
        for action, _, leaf in cli_reference.subcommands(sub):
            assert f"memory-pipeline {name} {action}" in shown
            assert any("--" in s for a in cli_reference.arguments(leaf) for s in a.option_strings)
    text = "\n".join(sec.astext() for sec in sections)
    for leaf in cli_reference.leaves(parser):
        common = cli_reference.takes_shared(leaf, shared)
        for action in cli_reference.arguments(leaf):
            if not (common and cli_reference.key(action) in shared):
                assert cli_reference.key(action)[0] in text, (leaf.prog, action.dest)
    assert ("--db",) in shared and ("--space",) in shared
    # serve takes the server's options, not the common ones: its section lists them all
    serve = next(sec for sec in sections if sec.astext().startswith("memory-pipeline serve"))
    assert "overrides HYBRID_RAG_EMBEDDING_MODEL" in serve.astext()
    assert "It takes the common options too." not in serve.astext()


def test_the_server_flags_are_taken_from_its_parse_args() -> None:
    parser = cli_reference.load_parser("serving.__main__:parse_args", calls_parse_args=True)
    assert parser.prog == "python -m serving"
    assert {"--http", "--port", "--space"} <= {s for a in parser._actions for s in a.option_strings}


def test_every_mcp_tool_is_listed_with_its_schema() -> None:
    tools = mcp_reference.list_tools()
    assert [t["name"] for t in tools] == [spec.name for spec in TOOLS]
    for tool in tools:
        section = mcp_reference.tool_section(tool)
        assert section.astext().startswith(tool["name"])
        assert tool["inputSchema"]["type"] == "object"
        shown = section.astext()
        for argument in tool["inputSchema"].get("properties", {}):
            assert argument in shown, (tool["name"], argument)


def test_every_dagster_definition_is_in_the_reference(tmp_path: Path) -> None:
    defs = dagster_reference.build(str(tmp_path))
    graph = defs.resolve_asset_graph()
    text = "\n".join(
        sec.astext()
        for sec in (
            dagster_reference.assets_section(graph),
            dagster_reference.checks_section(graph),
            dagster_reference.jobs_section(defs),
            dagster_reference.sensors_section(defs),
            dagster_reference.schedules_section(defs),
        )
    )
    names = [k.to_user_string() for k in graph.get_all_asset_keys()]
    names += [c.name for c in graph.asset_check_keys]
    names += [s.name for s in defs.sensors] + [s.name for s in defs.schedules]
    names += [j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__")]
    assert len(names) > 20
    for name in names:
        assert name in text, name


TABLE = """SciFact (300 queries):

| variant | nDCG@10 | MRR |
|---|---|---|
| bm25 | 0.6502 | 0.6150 |
| **hybrid** (default) | **0.7067** | — |

after
"""


def test_a_results_chart_reads_the_table_it_names() -> None:
    header, rows = results_charts.read_table(TABLE, "SciFact (")
    names, values = results_charts.series(header, rows, ["nDCG@10", "MRR"])
    assert names == ["bm25", "hybrid"]
    assert values["nDCG@10"] == [0.6502, 0.7067]
    assert values["MRR"][0] == 0.6150 and values["MRR"][1] != values["MRR"][1]  # NaN
    svg = results_charts.draw(names, values, "SciFact")
    assert svg.startswith("<svg") and "0.707" in svg
    with pytest.raises(Exception, match="no column"):
        results_charts.series(header, rows, ["Recall@10"])
