"""The serving process: an MCP server over the memory (``python -m serving``; docs/mcp.md).

``__main__`` is the composition root (environment, flags, models); ``server``
registers the tools of ``read_tools`` and ``write_tools`` — thin adapters over
``MemorySystem`` — with their annotations; ``schemas`` holds the pydantic
models at the boundary, ``wire`` how results and schemas are sent, ``hints``
the library's CLI hints said in MCP terms, ``errors`` what reaches a client when
a tool fails, ``paths`` which files ``ingest`` may read and ``http`` the HTTP
transport and its token.
It imports ``memory_pipeline`` and nothing imports it back.
"""
