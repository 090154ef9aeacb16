"""The wheel of this checkout, built as a user's ``pip`` builds it, for the install tests."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What the wheel is built from; anything else of the checkout stays behind.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "memory_pipeline", "serving")


def run(args: list[str | Path], cwd: Path) -> None:
    subprocess.run([str(a) for a in args], cwd=cwd, check=True, capture_output=True, timeout=600)


def build_wheel(tmp: Path) -> Path:
    """The wheel built from a copy of ``WHEEL_SOURCES`` under ``tmp``. No build isolation:
    setuptools comes from this environment, nothing is downloaded."""
    src, dist = tmp / "src", tmp / "dist"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in WHEEL_SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    run([*pip_wheel, "-w", dist, src], tmp)
    (wheel,) = dist.glob("memory_pipeline-*.whl")
    return wheel
