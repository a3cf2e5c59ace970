"""The fleet's seal and its session ids: AES-256-GCM, the first key seals and each opens (rotation); any
change, another purpose or a key no longer listed opens to nothing."""

from __future__ import annotations

from actors.fleet.seal import FleetSeal
from actors.fleet.session_ids import SessionIds

OLD, NEW, OTHER = b"o" * 32, b"n" * 32, b"x" * 32


def test_session_id_names_its_owner_and_opens_after_a_key_rotation() -> None:
    before = SessionIds(FleetSeal.of((OLD,)), "alpha")
    session_id = before.mint()
    rotated = SessionIds(FleetSeal.of((NEW, OLD)), "beta")  # the new key first: it seals, the old still opens
    assert rotated.owner(session_id) == "alpha"
    assert before.owner(rotated.mint()) is None  # sealed with the new key: the old list cannot open it
    assert SessionIds(FleetSeal.of((NEW,)), "beta").owner(session_id) is None  # the old key retired


def test_tampered_foreign_or_malformed_ids_open_to_nothing() -> None:
    ids = SessionIds(FleetSeal.of((OLD,)), "alpha")
    session_id = ids.mint()
    assert session_id.isascii() and len(session_id) <= 128  # fits the balancer's stick table
    for position in range(0, len(session_id), 7):
        changed = "A" if session_id[position] != "A" else "B"
        assert ids.owner(session_id[:position] + changed + session_id[position + 1 :]) is None
    assert SessionIds(FleetSeal.of((OTHER,)), "alpha").owner(session_id) is None  # another fleet's
    for bad in ("", "x", "é" * 40, "A" * 10_000, None, 7, session_id + "=", session_id[:-1]):
        assert ids.owner(bad) is None


def test_a_value_sealed_for_one_purpose_does_not_open_for_another() -> None:
    seal = FleetSeal.of((OLD,))
    assert seal.open(seal.seal(b"facts", b"one"), b"two") is None
    assert seal.open(seal.seal(b"facts", b"one"), b"one") == b"facts"
