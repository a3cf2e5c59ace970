"""One client session: reader, dispatcher and writer, and what the dispatcher runs per MCP feature."""
