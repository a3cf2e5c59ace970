"""What a tool's result may bring into a client's context (`max_output_chars`, limits.py) and how the
references of MCP Apps (`ui://` resources) read through the aggregation (app_uris.py).

Pure functions over decoded JSON: no actor, no I/O. The session builds one shaper per call from them
(actors/session/results.py); the catalog uses app_uris.py to publish `ui://` resources and the tools that
point at them."""
