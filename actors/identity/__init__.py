"""Who a request comes from: principals, bearer-token verification against trusted issuers' key sets, the
actors that keep each issuer's keys fresh, and the OAuth resource-server documents and challenges.

Below the frontends: it knows nothing of sessions or listeners.
"""

from actors.identity.principal import Principal as Principal
