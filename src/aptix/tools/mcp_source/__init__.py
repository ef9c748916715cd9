"""MCP servers as tool sources: their tools registered as ``<prefix>_<tool>`` (DESIGN §9).

``config`` (the settings entry) stays free of the ``mcp`` SDK so that reading the settings
does not load it; ``source.McpToolSource`` is what the composition root starts.
"""
