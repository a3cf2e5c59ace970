"""The periodic notes of many backends share one scan of the gateway's children (issue #27: with 100
backends, a scan per backend per note cost CPU that grew with the square of the backends)."""

from __future__ import annotations

import math
import os

import pytest

from actors.backends import descendants


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids whose children were read, in order; no scan or reap from before the test counts."""
    read: list[int] = []
    real = descendants.children

    def counted(pid: int) -> set[int]:
        read.append(pid)
        return real(pid) if pid == os.getpid() else set()

    monkeypatch.setattr(descendants, "children", counted)
    monkeypatch.setattr(descendants, "_own_children", (-math.inf, []))
    monkeypatch.setattr(descendants, "_last_reap", -math.inf)
    monkeypatch.setattr(descendants, "_subreaper", True)
    return read


def test_periodic_notes_and_reaps_of_a_hundred_backends_scan_the_gateways_children_once(
    scans: list[int],
) -> None:
    families = [descendants.Family(root) for root in range(4_000_000, 4_000_100)]  # no such processes
    for family in families:
        family.note(descendants.SHARED_SCAN_S)
        descendants.reap_adopted(descendants.SHARED_SCAN_S)
    assert scans.count(os.getpid()) == 1  # the first note scanned; everyone else used it
    assert [pid for pid in scans if pid != os.getpid()] == [family.root for family in families]


def test_a_note_or_reap_without_an_age_scans_afresh(scans: list[int]) -> None:
    family = descendants.Family(4_000_000)
    family.note(descendants.SHARED_SCAN_S)
    family.note()
    descendants.reap_adopted()
    descendants.reap_adopted()
    assert scans.count(os.getpid()) == 4
