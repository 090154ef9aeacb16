"""What the tests of the viewer's writes share: a client of the viewer's ASGI app with
the cookie a visit leaves, a form as the page serves it, a post as a browser sends it."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from starlette.testclient import TestClient

from memory_pipeline.system import MemorySystem
from memory_pipeline.ui.app import build_app, cookie_name

TOKEN = "t0ken-for-the-tests"
PORT = 8765
ORIGIN = f"http://127.0.0.1:{PORT}"


def viewer_client(system: MemorySystem, *, read_only: bool = False) -> TestClient:
    """The viewer over ``system``, visited once (its cookie set), redirects not followed."""
    app = build_app(system, token=TOKEN, host="127.0.0.1", port=PORT, read_only=read_only)
    client = TestClient(app, base_url=ORIGIN, follow_redirects=False)
    client.cookies.set(cookie_name(PORT), TOKEN)
    return client


def form_of(html: str, action: str) -> dict[str, str]:
    """The fields of the form posting to ``action`` (hidden ones and inputs' values)."""
    found = re.search(rf'<form[^>]*action="{re.escape(action)}">(.*?)</form>', html, re.S)
    assert found is not None, f"no form to {action}"
    fields = {
        unescape(n): unescape(v)
        for n, v in re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', found.group(1))
    }
    chosen = re.findall(
        r'<select name="([^"]+)">.*?<option value="([^"]*)" selected', found.group(1), re.S
    )
    fields.update({n: unescape(v) for n, v in chosen})
    fields.setdefault("knowledge_type", "")
    return fields


def post(client: TestClient, path: str, fields: dict[str, str], **headers: str) -> Any:
    """A form posted from the viewer's own page (its Origin), ``headers`` added."""
    return client.post(path, data=fields, headers={"origin": ORIGIN, **headers})
