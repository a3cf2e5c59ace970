"""Client side: the listeners (stdio, WebSocket, Streamable HTTP) and what admits a connection."""
