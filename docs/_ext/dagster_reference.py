"""``dagster-definitions``: assets, checks, jobs, sensors and schedules of the ``Definitions``.

The definitions are built by ``memory_pipeline.pipeline.definitions.build_definitions``
(what ``definitions.py`` calls) from an environment that points the memory at a
temporary folder; nothing is materialized and no model is loaded. The asset graph is
drawn from the same definitions.
"""

from __future__ import annotations

import tempfile
from typing import Any

from docnodes import code, inline, section, table, with_code
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.ext.graphviz import graphviz
from sphinx.util.docutils import SphinxDirective


def build(tmp: str) -> Any:
    from memory_pipeline.pipeline.definitions import build_definitions

    env = {
        "HYBRID_RAG_DB_PATH": f"{tmp}/memory.db",
        "HYBRID_RAG_INDEX_PATH": f"{tmp}/indices",
        "HYBRID_RAG_ARCHIVE_PATH": f"{tmp}/archive",
        "HYBRID_RAG_MODEL_CACHE": f"{tmp}/models",
    }
    return build_definitions(env)


def codes(names: Any) -> nodes.Node | str:
    names = sorted(names)
    return inline(*(code(n) for n in names)) if names else ""


def text(value: str | None) -> nodes.Node | str:
    return with_code(value or "")


def lineage(graph: Any, keys: list[Any]) -> graphviz:
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(graph.get(key).group_name or "default", []).append(key.to_user_string())
    lines = [
        "digraph assets {",
        '  rankdir=LR; bgcolor="transparent"; fontname="Helvetica"; fontsize=10;',
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica"];',
        '  edge [color="#555555"];',
    ]
    for i, (group, names) in enumerate(sorted(groups.items())):
        lines.append(f'  subgraph cluster_{i} {{ label="{group}"; style=dashed; color="#999999";')
        lines += [f'    "{n}";' for n in sorted(names)]
        lines.append("  }")
    for key in keys:
        for parent in sorted(graph.get(key).parent_keys, key=lambda k: k.to_user_string()):
            lines.append(f'  "{parent.to_user_string()}" -> "{key.to_user_string()}";')
    lines.append("}")
    node = graphviz()
    node["code"] = "\n".join(lines)
    node["options"] = {"docname": ""}
    node["alt"] = "Asset graph of the Dagster definitions"
    return node


def assets_section(graph: Any) -> nodes.section:
    # Upstream first, as the data flows.
    keys = [k for k in graph.toposorted_asset_keys if graph.get(k).is_materializable]
    sec = section("Assets", "dagster-assets")
    sec += lineage(graph, keys)
    rows = []
    for key in keys:
        node = graph.get(key)
        rows.append(
            [
                code(key.to_user_string()),
                node.group_name or "",
                codes(p.to_user_string() for p in node.parent_keys),
                ", ".join(sorted(node.kinds)),
                text(node.description),
            ]
        )
    sec += table(["asset", "group", "upstream", "kinds", "description"], rows)
    return sec


def checks_section(graph: Any) -> nodes.section:
    sec = section("Asset checks", "dagster-asset-checks")
    rows = []
    for ck in sorted(graph.asset_check_keys, key=lambda c: (c.asset_key.to_user_string(), c.name)):
        node = graph.get(ck)
        rows.append(
            [
                code(ck.name),
                code(ck.asset_key.to_user_string()),
                "yes" if node.blocking else "",
                text(node.description),
            ]
        )
    sec += table(["check", "asset", "blocking", "description"], rows)
    sec += nodes.paragraph(
        "",
        "A blocking check whose result fails keeps the assets downstream of its asset from "
        "materializing in that run. The severity (WARN or ERROR) is part of each check's "
        "result, decided when it runs; the descriptions say which.",
    )
    return sec


def jobs_section(defs: Any) -> nodes.section:
    sec = section("Jobs", "dagster-jobs")
    rows = []
    for job in sorted(defs.resolve_all_job_defs(), key=lambda j: j.name):
        if job.name.startswith("__"):
            continue  # Dagster's implicit job of every asset
        layer = job.asset_layer
        selected = [k.to_user_string() for k in layer.selected_asset_keys]
        checks = [c.name for c in getattr(layer, "selected_asset_check_keys", ())]
        rows.append([code(job.name), codes(selected) or codes(checks), text(job.description)])
    sec += table(["job", "runs", "description"], rows)
    return sec


def sensors_section(defs: Any) -> nodes.section:
    sec = section("Sensors", "dagster-sensors")
    rows = []
    for sensor in sorted(defs.sensors, key=lambda s: s.name):
        rows.append(
            [
                code(sensor.name),
                f"{sensor.minimum_interval_seconds} s" if sensor.minimum_interval_seconds else "",
                sensor.default_status.value.lower(),
                codes(t.job_name for t in sensor.targets),
                text(sensor.description),
            ]
        )
    sec += table(["sensor", "every", "by default", "starts", "description"], rows)
    return sec


def schedules_section(defs: Any) -> nodes.section:
    sec = section("Schedules", "dagster-schedules")
    rows = []
    for schedule in sorted(defs.schedules, key=lambda s: s.name):
        rows.append(
            [
                code(schedule.name),
                code(str(schedule.cron_schedule)),
                schedule.execution_timezone or "UTC",
                schedule.default_status.value.lower(),
                code(schedule.job_name),
                text(schedule.description),
            ]
        )
    sec += table(["schedule", "cron", "time zone", "by default", "job", "description"], rows)
    return sec


class DagsterDefinitions(SphinxDirective):
    def run(self) -> list[nodes.Node]:
        with tempfile.TemporaryDirectory(prefix="memory-pipeline-docs-") as tmp:
            defs = build(tmp)
            graph = defs.resolve_asset_graph()
            out = [
                assets_section(graph),
                checks_section(graph),
                jobs_section(defs),
                sensors_section(defs),
                schedules_section(defs),
            ]
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("sphinx.ext.graphviz")
    app.add_directive("dagster-definitions", DagsterDefinitions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
