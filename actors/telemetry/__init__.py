"""Telemetry: what the gateway measures, as a layer of its own. Sessions and backends write to it on the hot
path; the admin listener (the status page, /metrics) and the exporters read from it. It knows no listener.

meters.py        the counters the hot path bumps (calls, latency buckets, errors, bytes, starts)

Nothing is imported here: a module that counts takes only what it needs, and heavy exporters load only
where they are turned on.
"""
