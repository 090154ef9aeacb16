#!/usr/bin/env python3
"""Screenshot the asset lineage page of a running Dagster UI with headless Chromium.

    make run &                                  # or any running `dagster dev`
    .venv/bin/python scripts/screenshot_lineage.py [--url http://127.0.0.1:3000] [--out docs/lineage.png]
    .venv/bin/python scripts/screenshot_lineage.py --page '/assets/documents?view=checks' --out docs/checks.png

Installs Debian's ``chromium`` (apt-get) when it is missing. Dismisses the UI's
"join the community" dialog through GraphQL (``setNuxSeen``) so it does not cover
the graph, then lets Chromium render the page for a while and saves the PNG.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",  # needed as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def ensure_chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    print("chromium not found; installing it with apt-get …", file=sys.stderr)
    subprocess.run(["apt-get", "update", "-qq"], check=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "chromium"],
        check=True,
        env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )
    found = shutil.which("chromium")
    if not found:
        raise SystemExit("apt-get installed chromium but it is not on PATH")
    return found


def wait_for(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=3):
                return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"no Dagster UI answers at {url} (start it with `make run`)")


def dismiss_community_dialog(url: str) -> None:
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": "mutation { setNuxSeen }"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10):
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:3000", help="the Dagster UI")
    parser.add_argument("--out", default=str(REPO / "docs" / "lineage.png"))
    parser.add_argument("--location", default="memory_pipeline")
    parser.add_argument("--group", default="ingestion", help="asset group whose lineage to show")
    parser.add_argument(
        "--page",
        help="another page of the UI instead, e.g. '/assets/documents?view=checks' (the checks)",
    )
    parser.add_argument("--size", default="1800,900", help="window width,height")
    parser.add_argument("--render-ms", type=int, default=25_000, help="virtual time to render")
    args = parser.parse_args()

    url = args.url.rstrip("/")
    chromium = ensure_chromium()
    wait_for(url, timeout=120)
    dismiss_community_dialog(url)
    out = Path(args.out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    page = (
        f"{url}{args.page}"
        if args.page
        else (f"{url}/locations/{args.location}/asset-groups/{args.group}")
    )
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",  # a fresh profile every time
                f"--window-size={args.size}",
                f"--virtual-time-budget={args.render_ms}",
                f"--screenshot={out}",
                page,
            ],
            check=True,
            capture_output=True,
            timeout=180,
        )
    if not out.exists() or out.stat().st_size == 0:
        raise SystemExit(f"chromium wrote no screenshot to {out}")
    print(f"saved {out} ({out.stat().st_size} bytes) from {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
