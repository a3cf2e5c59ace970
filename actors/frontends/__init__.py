"""Client side: the listeners (stdio, WebSocket, Streamable HTTP) and what admits a connection.

listener.py   Listener, the base of each network listener: what the frontends supervisor runs
listening.py  the sockets: bind, accept, and contain each connection (Endpoint, Acceptor)
admission.py  path, Host, Origin, bearer token and session counts; auth.py: tokens and Refused
websocket.py  the WebSocket listener: one session per connection
http/         the Streamable HTTP listener: one session per Mcp-Session-Id
stdio.py      the gateway's own stdin and stdout, as one session's transport
"""
