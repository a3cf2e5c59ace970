"""The Streamable HTTP frontend.

listener.py       the Listener: hypercorn's server for each accepted connection, serving the app
app.py            the ASGI app: admission, then POST, GET and DELETE; a modern POST goes to modern.py
sessions.py       the sessions by Mcp-Session-Id, and their lifetimes (open, end, idle expiry); the
                  one-request sessions of modern POSTs
sse.py            SSE framing, writing a stream as its events come, resumption with Last-Event-ID
transport.py      one HTTP session as a Transport: which stream each outgoing message goes on
responses.py      plain JSON answers and refusals
ladder.py         which POSTs are of the 2026-07-28 era, and the checks one passes before it is served
param_headers.py  Mcp-Name's base64 sentinel and the Mcp-Param-* headers a tool declares (x-mcp-header)
modern.py         a modern POST served on its own: the catalog's checks, its session, JSON or SSE
one_request.py    the Transport of a session that serves one modern POST
"""
