"""The catalog: which backend owns which tool, prompt and resource, under which public name, and in what
state each backend is. Its public names, re-exported from the modules that define them:

- status.py: BackendState, BackendStatus (a backend's state and how clients are told it)
- naming.py: the naming rule (`[gateway] tool_names`) and Route; uris.py and uri_templates.py for resources
- view.py: CatalogView, the immutable snapshot sessions route with
- catalog.py: the Catalog actor, which folds backends' events into views (built by view_builder.py)
"""

from actors.catalog.catalog import Catalog as Catalog
from actors.catalog.catalog import CatalogEvent as CatalogEvent
from actors.catalog.naming import ALWAYS_PREFIX as ALWAYS_PREFIX
from actors.catalog.naming import MAX_NAME_LENGTH as MAX_NAME_LENGTH
from actors.catalog.naming import PORTABLE_NAME as PORTABLE_NAME
from actors.catalog.naming import PREFIX_ON_COLLISION as PREFIX_ON_COLLISION
from actors.catalog.naming import SEPARATOR as SEPARATOR
from actors.catalog.naming import Route as Route
from actors.catalog.naming import assign_public_names as assign_public_names
from actors.catalog.status import BackendState as BackendState
from actors.catalog.status import BackendStatus as BackendStatus
from actors.catalog.view import CatalogView as CatalogView
