"""Byte streams turned into whole frames and back: the Transport interface, lines, pipes, WebSocket."""
