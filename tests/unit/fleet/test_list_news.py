"""Backends' list changes between replicas, without Redis: the relay's outbox holds one notice per backend
and method however often a backend announces, a notice names only a list_changed method, and news of
another replica's change reaches only a backend actor running here under that name. And a client's
notification told to the other replicas' copies of its session: only what they act on, checked again."""

from __future__ import annotations

from typing import Final

import orjson

from actors.backends.list_news import ListNews
from actors.config.fleet_schema import FleetSettings
from actors.fleet.relay import FleetRelay
from actors.fleet.store import FleetStore
from actors.runtime.broadcast import Broadcast

TOOLS: Final = "notifications/tools/list_changed"
PROMPTS: Final = "notifications/prompts/list_changed"


def relay(replica: str = "alpha") -> FleetRelay:
    settings = FleetSettings(redis_url="redis://127.0.0.1:1", replica=replica, keys=(b"k" * 32,))
    store = FleetStore(settings=settings, available=True)  # the publisher never runs: the outbox is read
    return FleetRelay(settings=settings, store=store, events=Broadcast())


def queued(r: FleetRelay) -> list[dict[str, object]]:
    notices = []
    while True:
        try:
            notices.append(orjson.loads(r._outbox.receive_nowait().payload))
        except Exception:
            return notices


def test_a_flood_of_list_changes_waits_in_the_outbox_as_one_notice_per_backend_and_method() -> None:
    r = relay()
    for _ in range(500):
        r.publish_list_changed("t", TOOLS)
    r.publish_list_changed("t", PROMPTS)
    r.publish_list_changed("u", TOOLS)
    assert queued(r) == [
        {"from": "alpha", "backend": "t", "changed": TOOLS},
        {"from": "alpha", "backend": "t", "changed": PROMPTS},
        {"from": "alpha", "backend": "u", "changed": TOOLS},
    ]


def test_list_changes_while_redis_is_down_are_not_kept_waiting() -> None:
    r = relay()
    r.store.available = False
    r.publish_list_changed("t", TOOLS)
    r.store.available = True
    r.publish_list_changed("t", TOOLS)  # not taken for one still waiting
    assert len(queued(r)) == 1


def test_a_notice_relists_only_a_named_list_of_a_backend_running_here() -> None:
    news, r = ListNews(), relay("beta")
    r.on_list_changed = news.elsewhere
    relisted: list[tuple[str, bool]] = []
    with news.hearing("t", lambda method, announced: relisted.append((method, announced))):
        for notice in (
            {"from": "alpha", "backend": "t", "changed": TOOLS},
            {"from": "alpha", "backend": "t", "changed": "notifications/message"},  # not a list change
            {"from": "alpha", "backend": "t", "changed": ["x"]},
            {"from": "alpha", "backend": "nope", "changed": TOOLS},  # no such backend here
            {"from": "alpha", "backend": "t" * 10_000, "changed": TOOLS},
            {"from": "beta", "backend": "t", "changed": PROMPTS},  # this replica's own
        ):
            r._notice(orjson.dumps(notice))
        r._notice(b"\x00not json")
    r._notice(orjson.dumps({"from": "alpha", "backend": "t", "changed": TOOLS}))  # its actor has stopped
    assert relisted == [(TOOLS, True)]


def test_a_backends_own_announcement_goes_to_the_fleet_and_news_from_it_does_not() -> None:
    news = ListNews()
    announced: list[tuple[str, str]] = []
    news.heard("t", TOOLS)  # no fleet: nothing to tell
    news.announced = lambda backend, method: announced.append((backend, method))
    relisted: list[tuple[str, bool]] = []
    with news.hearing("t", lambda method, announced: relisted.append((method, announced))):
        news.heard("t", TOOLS)
        assert news.elsewhere("t", PROMPTS)
    assert announced == [("t", TOOLS)]
    assert relisted == [(PROMPTS, True)]
    assert not news.elsewhere("t", TOOLS)


async def test_once_redis_answers_again_missed_changes_are_published_and_every_list_here_checked() -> None:
    news, r = ListNews(), relay()
    news.announced, r.on_rejoined = r.publish_list_changed, news.check_all
    relisted: list[tuple[str, str, bool]] = []
    with (
        news.hearing("t", lambda method, announced: relisted.append(("t", method, announced))),
        news.hearing("u", lambda method, announced: relisted.append(("u", method, announced))),
    ):
        r.store.available = False
        for _ in range(3):
            news.heard("t", TOOLS)  # not published: Redis is away
        news.heard("u", PROMPTS)
        assert queued(r) == []
        r.store.available = True
        await r.catch_up()
    assert queued(r) == [
        {"from": "alpha", "backend": "t", "changed": TOOLS},
        {"from": "alpha", "backend": "u", "changed": PROMPTS},
    ]
    methods = [f"notifications/{kind}/list_changed" for kind in ("tools", "prompts", "resources")]
    assert relisted == [(name, method, False) for name in "tu" for method in methods]
    await r.catch_up()  # published once: nothing missed any more
    assert queued(r) == []


def test_a_clients_notification_is_told_with_only_what_the_other_copies_act_on() -> None:
    r = relay()
    cancel = {"requestId": 5, "reason": "r" * 5000, "_meta": {"x": "y" * 5000}}
    assert r.publish_told("d" * 40, "notifications/cancelled", cancel)
    assert r.publish_told("d" * 40, "notifications/initialized", {"anything": 1})
    for method, params in (
        ("notifications/progress", {}),  # nothing another copy acts on
        ("notifications/cancelled", {"requestId": True}),
        ("notifications/cancelled", {"requestId": "i" * 2000}),
        ("notifications/cancelled", {"requestId": 1, "reason": 5}),  # the session drops it: so do we
        ("notifications/cancelled", [1]),
    ):
        assert not r.publish_told("d" * 40, method, params)
    assert queued(r) == [
        {
            "from": "alpha",
            "told": "d" * 40,
            "method": "notifications/cancelled",
            "params": {"requestId": 5, "reason": "r" * 1024},
        },
        {"from": "alpha", "told": "d" * 40, "method": "notifications/initialized", "params": {}},
    ]


def test_a_malformed_told_notice_is_dropped_and_a_good_one_reaches_the_copy() -> None:
    told: list[tuple[str, str, dict[str, object]]] = []
    r = relay("beta")
    r.on_told = lambda digest, method, params: told.append((digest, method, params))
    cancel = {"requestId": "a"}
    good = {"from": "alpha", "told": "d" * 40, "method": "notifications/cancelled", "params": cancel}
    for bad in (
        {**good, "told": "d" * 41},
        {**good, "told": 7},
        {**good, "method": "notifications/progress"},
        {**good, "method": ["notifications/cancelled"]},
        {**good, "params": {"requestId": None}},
        {**good, "params": "x"},
        {**good, "from": "beta"},  # its own notice, back from Redis
    ):
        r._notice(orjson.dumps(bad))
    r._notice(orjson.dumps(good))
    assert told == [("d" * 40, "notifications/cancelled", {"requestId": "a"})]
