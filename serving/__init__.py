"""The serving process: an MCP server over the memory (``python -m serving``; docs/mcp.md).

``__main__`` is the composition root (environment, flags, models); ``server``
registers the tools of ``read_tools`` and ``write_tools`` — thin adapters over
``MemorySystem`` — with their annotations; ``schemas`` holds the pydantic
models at the boundary and ``paths`` decides which files ``ingest`` may read.
It imports ``memory_pipeline`` and nothing imports it back.
"""
