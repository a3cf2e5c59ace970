"""Progressive discovery: a big catalog exposed as pins and three tools (search_tools, get_tool_schema,
call_tool) instead of every definition.

The transform takes one exposure (the tools a caller may see, after policy and middleware) and the
[discovery] settings, and gives the listing a client gets (exposure.py). The index (index.py) is SQLite FTS5
with BM25 over tool names split into words (words.py), descriptions and parameter names; search rows are
compact (rows.py). The session reaches it through one hook (session_hook.py): its tools/list and the three
tools' calls; call_tool re-enters the session's own tools/call path.
"""

from actors.discovery.settings import DiscoveryMode, DiscoverySettings

__all__ = ["DiscoveryMode", "DiscoverySettings"]
