"""The Streamable HTTP frontend."""
