"""README.ja.md is README.md in Japanese: the same sections, the same commands.

The prose is translated and may differ; the structure may not. Headings must have the
same levels in the same order, and every code block must hold the same commands (the
comments after them are translated, so they are left out of the comparison). Both name
the same settings and link to the same pages, and each links to the other near its top.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(```+|~~~+)\s*(\S*)")
HEADING = re.compile(r"^(#{1,6})\s+\S")
COMMENT = re.compile(r"(^|\s)#(\s.*)?$")


@dataclass(frozen=True)
class Structure:
    headings: tuple[int, ...]  # the level of each heading, in order
    blocks: tuple[tuple[str, tuple[str, ...]], ...]  # (language, commands) of each code block


def commands(lines: list[str]) -> tuple[str, ...]:
    """The lines of a code block without their comments; lines that are only a comment go."""
    kept = (COMMENT.sub("", line).rstrip() for line in lines)
    return tuple(line for line in kept if line.strip())


def structure(text: str) -> Structure:
    headings: list[int] = []
    blocks: list[tuple[str, tuple[str, ...]]] = []
    fence: str | None = None
    language, body = "", []
    for line in text.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence, language, body = opened.group(1), opened.group(2), []
        elif fence is not None and line.strip() == fence:
            blocks.append((language, commands(body)))
            fence = None
        elif fence is not None:
            body.append(line)
        elif match := HEADING.match(line):
            headings.append(len(match.group(1)))
    assert fence is None, "a code block is never closed"
    return Structure(tuple(headings), tuple(blocks))


def drift(english: str, japanese: str) -> list[str]:
    """What differs in structure between the two READMEs; empty when they agree."""
    en, ja = structure(english), structure(japanese)
    found = []
    if en.headings != ja.headings:
        found.append(f"heading levels differ: {en.headings} vs {ja.headings}")
    if len(en.blocks) != len(ja.blocks):
        found.append(f"{len(en.blocks)} code blocks vs {len(ja.blocks)}")
    for i, (a, b) in enumerate(zip(en.blocks, ja.blocks, strict=False), 1):
        if a != b:
            found.append(f"code block {i} differs: {a} vs {b}")
    return found


ENGLISH = (ROOT / "README.md").read_text(encoding="utf-8")
JAPANESE = (ROOT / "README.ja.md").read_text(encoding="utf-8")


def test_the_japanese_readme_has_the_english_structure() -> None:
    assert drift(ENGLISH, JAPANESE) == []
    assert structure(ENGLISH).headings, "README.md has no headings to compare"
    assert len(structure(ENGLISH).blocks) >= 4


def test_the_japanese_readme_names_every_variable_and_link() -> None:
    """The settings table and the links to the other pages are the same in both."""
    for pattern in (r"`(HYBRID_RAG_\w+|MEMORY_PIPELINE_\w+)`", r"\]\(((?:docs|eval)/[^)\s]+)\)"):
        english = set(re.findall(pattern, ENGLISH))
        assert english, pattern
        assert english == set(re.findall(pattern, JAPANESE)), english ^ set(
            re.findall(pattern, JAPANESE)
        )


def test_each_readme_links_to_the_other_near_its_top() -> None:
    assert "](README.ja.md)" in "\n".join(ENGLISH.splitlines()[:5])
    assert "](README.md)" in "\n".join(JAPANESE.splitlines()[:5])


def _drop_section(text: str) -> str:
    return re.sub(r"\n## [^\n]*\n(?=(?:.*\n)*?## )", "\n", text, count=1)


def _change_first_command(text: str) -> str:
    return text.replace("make test ", "make tests ", 1)


def _drop_last_block(text: str) -> str:
    start = text.rindex("```python")
    end = text.index("```\n", start + 3) + 4
    return text[:start] + text[end:]


@pytest.mark.parametrize(
    ("altered", "expected"),
    [
        (_drop_section, "heading levels differ"),
        (lambda t: t.replace("\n## ", "\n### ", 1), "heading levels differ"),
        (_change_first_command, "code block 1 differs"),
        (lambda t: t.replace("--top-k 5", "--top-k 3", 1), "code block 3 differs"),
        (_drop_last_block, "code blocks vs"),
    ],
    ids=["section-dropped", "heading-level", "command-changed", "flag-changed", "block-dropped"],
)
def test_a_drift_is_found(altered, expected) -> None:  # type: ignore[no-untyped-def]
    changed = altered(JAPANESE)
    assert changed != JAPANESE, "the alteration did not change the text"
    assert any(expected in d for d in drift(ENGLISH, changed)), drift(ENGLISH, changed)


def test_translated_comments_are_not_a_drift() -> None:
    english = "# t\n\n```bash\nmake run    # start it\n# only a comment\n```\n"
    japanese = "# t\n\n```bash\nmake run    # 起動する\n```\n"
    assert drift(english, japanese) == []
    assert structure(english).blocks == (("bash", ("make run",)),)
