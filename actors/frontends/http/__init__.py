"""The Streamable HTTP frontend.

listener.py   the Listener: hypercorn's server for each accepted connection, serving the app
app.py        the ASGI app: admission, then POST, GET and DELETE
sessions.py   the sessions by Mcp-Session-Id, and their lifetimes (open, end, idle expiry)
sse.py        SSE framing, writing a stream as its events come, resumption with Last-Event-ID
transport.py  one HTTP session as a Transport: which stream each outgoing message goes on
"""
