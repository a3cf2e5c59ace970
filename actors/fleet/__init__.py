"""Several gateway replicas behind one load balancer, sharing sessions through Redis ([fleet]).

Imported only when the config has a [fleet] table (it imports coredis).

    seal.py          AES-256-GCM with the fleet keys (the first seals, each opens)
    session_ids.py   legacy HTTP session ids that name their owner replica, sealed
    store.py         the link to Redis and whether it answers (the replica serves alone when not)
    sessions.py      each legacy session's client facts in Redis, so any replica can take it up
    session_state.py what its client set since (log level, subscriptions), asked again at a take-up
    relay.py         pub/sub: resource updates and list changes to every replica; a session's events to
                     its GET's replica
    limits.py        [limits] fleet-wide: GCRA and in-flight counts added up in Redis by Lua scripts
    states.py        requestStates any replica opens, single use fleet-wide, retries forwarded to the owner
    fleet.py         the replica's fleet parts, built from [fleet] and run in the gateway's root
"""
