"""The wire: JSON-RPC messages, the codec, error codes, versions, pages, and the actors' envelopes."""
