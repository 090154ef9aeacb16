"""The serving process: a light MCP server over the published memory (see the README).

It imports ``memory_pipeline`` and nothing imports it back.
"""
