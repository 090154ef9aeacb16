"""Pages whose text lives outside ``docs/``, and links to such files from inside it.

``README.md`` and ``README.ja.md`` stay where GitHub shows them; the pages
``readme`` and ``readme-ja`` take their text when the site is read. Their links,
written relative to the repository root, and the pages' links to ``eval/README.md``
(shown here as ``evaluation``), are rewritten to the site's pages, so a link that
works on GitHub also works here, and a broken one fails the build.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx

# page name → the file, relative to the repository root, that holds its text
PAGES = {"readme": "README.md", "readme-ja": "README.ja.md"}
# files outside docs/ that the site shows as one of its pages
SHOWN_AS = {
    "README.md": "readme.md",
    "README.ja.md": "readme-ja.md",
    "eval/README.md": "evaluation.md",
}

LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def rewrite(text: str, origin: str) -> str:
    """Links in ``text`` (a file at ``origin``, relative to the root) made relative to docs/."""
    base = posixpath.dirname(origin)

    def fix(match: re.Match[str]) -> str:
        target = match.group(2)
        if "://" in target or target.startswith(("#", "mailto:")):
            return match.group(0)
        path, sep, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(base, path)) if path else origin
        if resolved in SHOWN_AS:
            new = SHOWN_AS[resolved]
        elif resolved.startswith("docs/"):
            new = resolved.removeprefix("docs/")
        else:
            return match.group(0)
        return f"{match.group(1)}{new}{sep}{anchor}{match.group(3)}"

    return LINK.sub(fix, text)


def on_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    root = Path(app.srcdir).parent
    if docname in PAGES:
        path = root / PAGES[docname]
        app.env.note_dependency(str(path))
        source[0] = rewrite(path.read_text(encoding="utf-8"), PAGES[docname])
    elif "/" not in docname:
        source[0] = rewrite(source[0], f"docs/{docname}.md")


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", on_source_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
