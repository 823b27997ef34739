"""The MCP adapter: the tool registry and the agent prompts served over MCP (streamable HTTP at
/mcp, and stdio). It imports no app above `organization`: the tools of `tasks` and
`collaboration` reach it through the registry.

- `server.py` — the low-level MCP server (tools, prompts) and the stdio transport.
- `tools.py` — the registry's tools as MCP tools and their results.
- `prompts.py` — the system prompt (seed 001) and the expert-discovery prompt (seed 002).
- `gate.py` — the /mcp HTTP door: Host/Origin checks, the bearer key, the session manager.
- `errors.py` — failures as MCP tool errors in our error shape.

The project's ASGI app, which routes /mcp here and runs the lifespan, is config/asgi.py.
"""
