"""Retrieval quality over time: the golden set evaluated nightly, gated against the last good run."""
