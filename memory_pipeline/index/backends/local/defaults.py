"""The dense index's settings and their defaults, importable without FAISS (``dense.py``)."""

from __future__ import annotations

DEFAULT_IVF_THRESHOLD = 200_000
#: The approximate index a large segment gets: ``ivf`` (the default), ``hnsw``, or
#: ``flat`` (none: every search exact).
DENSE_INDEXES = ("flat", "ivf", "hnsw")
DEFAULT_DENSE_INDEX = "ivf"
