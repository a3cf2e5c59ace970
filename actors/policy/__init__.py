"""Per-principal policy: CEL rules compiled at config load (rules.py), what they see (context.py), and the
gateway's rules in force with its cached filtered lists (gate.py)."""

from actors.policy.context import STDIO_CALLER as STDIO_CALLER
from actors.policy.context import Caller as Caller
from actors.policy.context import Target as Target
from actors.policy.context import caller_of as caller_of
from actors.policy.gate import PolicyGate as PolicyGate
from actors.policy.rules import Decision as Decision
from actors.policy.rules import Policy as Policy
