"""The admin listener: health, readiness, Prometheus metrics, the status tree as JSON and as a live page.

exposition.py    those counters and the live state as Prometheus metric families, at scrape time
history.py       each backend's state changes, from the catalog's views
rates.py         calls per second and p50/p99 per backend, sampled once a second
status.py        the tree as JSON (/status) and readiness (/readyz)
app.py           the ASGI app: routes, bearer token, Host check, the event stream
listener.py      the admin listener: bound before backends start, supervised, restarted
service.py       the admin as one child of the gateway's root
status_command.py  `mcp-gateway status`: the tree printed from a running gateway
"""
