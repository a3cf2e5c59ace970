"""Ask ids in a fleet: what a legacy HTTP client sees on the gateway's requests names the replica that
asked and the session it asked; only that run of that replica reads it back, for that session. Anything
else (altered, another session's, an earlier run's, another fleet's, not a string) opens to nothing."""

from __future__ import annotations

from actors.fleet.ask_ids import AskIdSeal
from actors.fleet.seal import FleetSeal

KEY, OTHER = b"k" * 32, b"x" * 32


def test_an_ask_id_names_its_replica_and_session_and_reads_back_only_there() -> None:
    alpha = AskIdSeal(FleetSeal.of((KEY,)), "alpha")
    beta = AskIdSeal(FleetSeal.of((KEY,)), "beta")
    seen = alpha.for_session("s1").outward(7)
    assert isinstance(seen, str) and seen.isascii() and len(seen) <= 128
    assert alpha.for_session("s1").outward(7) != seen  # a fresh nonce each time: nothing to correlate
    assert beta.asker("s1", seen) == alpha.asker("s1", seen) == "alpha"  # any replica routes it
    assert alpha.for_session("s1").inward(seen) == 7
    assert alpha.asker("s2", seen) is None and alpha.for_session("s2").inward(seen) is None
    assert beta.for_session("s1").inward(seen) is None  # not beta's
    restarted = AskIdSeal(FleetSeal.of((KEY,)), "alpha")  # the same name, another run
    assert restarted.asker("s1", seen) == "alpha" and restarted.for_session("s1").inward(seen) is None


def test_altered_foreign_or_malformed_ask_ids_open_to_nothing() -> None:
    alpha = AskIdSeal(FleetSeal.of((KEY,)), "alpha")
    ids = alpha.for_session("s1")
    seen = ids.outward(1 << 62)
    assert ids.inward(seen) == 1 << 62
    for position in range(0, len(seen), 5):
        changed = seen[:position] + ("A" if seen[position] != "A" else "B") + seen[position + 1 :]
        assert alpha.asker("s1", changed) is None and ids.inward(changed) is None
    assert AskIdSeal(FleetSeal.of((OTHER,)), "alpha").asker("s1", seen) is None  # another fleet's
    session_id = FleetSeal.of((KEY,)).seal(b"x" * 40, b"mcp-gateway/http-session-id/v1")
    for bad in (1, True, None, "", "1", "é" * 40, "A" * 10_000, seen + "=", session_id, [seen]):
        assert alpha.asker("s1", bad) is None and ids.inward(bad) is None
