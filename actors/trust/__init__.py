"""Trust in what backends advertise: every tool, prompt and resource template pinned by the digest of its
canonical form, a changed one held until an operator approves it (issue #36). Pure and below config (it
knows no catalog): the catalog judges each list with the ledger, the trust keeper (catalog/trust_keeper.py)
writes what it decides to a store.

    modes.py         TrustMode (off, pin, scan, manual) and HoldReason
    definitions.py   the fields a digest covers, RFC 8785, the fingerprint and the text a reviewer reads
    scan.py          the poisoning scan: hidden characters, HTML comments, instructions, paths, URLs
    diff.py          the diff a reviewer reads
    records.py       Baseline, Held, TrustEvent and their stored forms
    ledger.py        the judgement of each list against the baselines, bounded
    store.py         the store's interface; sqlite_store.py, the default one (Redis: fleet/trust_store.py)
"""

from actors.trust.definitions import DefinitionKey as DefinitionKey
from actors.trust.definitions import Kind as Kind
from actors.trust.ledger import Ledger as Ledger
from actors.trust.ledger import Writes as Writes
from actors.trust.modes import HoldReason as HoldReason
from actors.trust.modes import TrustMode as TrustMode
from actors.trust.records import Baseline as Baseline
from actors.trust.records import Held as Held
from actors.trust.records import TrustEvent as TrustEvent
