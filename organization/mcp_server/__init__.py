"""The MCP adapter: the tool registry and the agent prompts over MCP (HTTP at /mcp, and stdio).

It imports no app above `organization`: the other apps' tools reach it through the registry.
The project's ASGI app, which routes /mcp here, is config/asgi.py.
"""
