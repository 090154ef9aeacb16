"""docs/install.md tells the truth about the install: its extras table names exactly the
extras pyproject.toml declares, and ``dev`` (what ``make install`` installs) holds them all."""

from __future__ import annotations

import re
import tomllib

from tests.project.wheels import ROOT

DOC = ROOT / "docs" / "install.md"


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_extras_table_names_every_extra_and_no_other() -> None:
    table = re.search(r"\| extra \| adds \| for \|\n\|[-|]+\|\n((?:\|.*\n)+)", DOC.read_text())
    assert table is not None
    named = {re.match(r"\| `([a-z]+)` \|", row).group(1) for row in table.group(1).splitlines()}  # type: ignore[union-attr]
    assert named == set(project()["optional-dependencies"])


def test_make_install_takes_every_extra() -> None:
    extras = project()["optional-dependencies"]
    [own] = [r for r in extras["dev"] if r.startswith("memory-pipeline[")]
    inside = set(own.removeprefix("memory-pipeline[").removesuffix("]").split(","))
    assert inside == set(extras) - {"dev"}
    assert "'.[dev]'" in (ROOT / "Makefile").read_text()


def test_the_default_dependencies_hold_no_torch_and_no_dagster() -> None:
    names = {re.split(r"[ <>=~!\[;]", r, maxsplit=1)[0].lower() for r in project()["dependencies"]}
    assert not names & {"torch", "sentence-transformers", "transformers", "dagster"}
