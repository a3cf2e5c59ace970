"""Chaos under a fleet's load (`scripts/chaos --fleet`): scripts/fleet's replicas, Redis, HAProxy and SDK
clients of both eras, while every --every seconds a replica is killed (SIGKILL) and started again on its
port, or Redis is (started again empty: nothing is saved).

What must hold: no call answered wrongly; no legacy session lost (a client whose replica died goes on, in
the same session, on another replica that takes it up from Redis; its calls in flight on the dead one fail);
every failure a clear error (a message, never a hang) within a fault's window, when what failed was in
flight on what was killed. The last line: `fleet chaos: N replicas, C calls, E errors (X outside a fault),
W wrong answers, L sessions lost, F faults`; exit 0 only when X, W and L are 0.

    scripts/chaos --fleet [--replicas N] [--seconds S] [--clients C] [--every K] [--seed X]
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Final

import attrs
import trio
from fleet import Fleet, FleetStartError, Tally, fleet_running, load, report

EXCUSE_MARGIN_S: Final = 2.0  # after a restart: a client's retry of its GET stream or connection settles
LOST: Final = ("404", "session not found", "unknown or expired session", "session terminated")


@attrs.define
class Fault:
    what: str
    at: float
    back_at: float | None = None

    def excuses(self, sent: float, ended: float) -> bool:
        back = (self.back_at if self.back_at is not None else float("inf")) + EXCUSE_MARGIN_S
        return sent <= back and ended >= self.at


async def wreck(
    fleet: Fleet, replicas: int, until: float, every_s: float, rng: random.Random, faults: list[Fault]
) -> None:
    """Every `every_s`: one replica or Redis killed and started again, until `until`."""
    while trio.current_time() + every_s < until:
        await trio.sleep(every_s)
        if rng.random() < 0.25:
            fault = Fault("redis", trio.current_time())
            faults.append(fault)
            fleet.processes["redis"].kill()
            await trio.sleep(0.5)
            await trio.to_thread.run_sync(fleet.start_redis)
        else:
            number = rng.randrange(replicas)
            fault = Fault(f"replica r{number}", trio.current_time())
            faults.append(fault)
            fleet.processes[f"replica-{number}"].kill()
            await trio.sleep(0.3)
            await trio.to_thread.run_sync(fleet.start_replica, number)
        fault.back_at = trio.current_time()
        print(
            f"fleet chaos: {fault.what} killed and back in {fault.back_at - fault.at:.1f}s", file=sys.stderr
        )


async def run(fleet: Fleet, args: argparse.Namespace) -> tuple[dict[str, Tally], list[Fault]]:
    faults: list[Fault] = []
    rng = random.Random(args.seed)
    async with trio.open_nursery() as nursery:
        until = trio.current_time() + args.seconds
        nursery.start_soon(wreck, fleet, args.replicas, until, args.every, rng, faults)
        tallies = await load(fleet.url, args.seconds, args.clients)
    return tallies, faults


def judge(tallies: dict[str, Tally], faults: list[Fault], replicas: int) -> int:
    outside, lost = 0, 0
    for era, tally in tallies.items():
        for sent, ended, what in tally.failures:
            if era == "legacy" and any(sign in what.lower() for sign in LOST):
                lost += 1
                print(f"    lost session ({era}): {what[:200]}")
            elif not what.strip() or not any(fault.excuses(sent, ended) for fault in faults):
                outside += 1
                print(f"    error outside a fault ({era}): {what[:200]}")
    calls = sum(t.calls for t in tallies.values())
    errors = sum(t.errors for t in tallies.values())
    wrong = sum(t.wrong for t in tallies.values())
    print(
        f"fleet chaos: {replicas} replicas, {calls} calls, {errors} errors ({outside} outside a fault), "
        f"{wrong} wrong answers, {lost} sessions lost, {len(faults)} faults"
    )
    return 0 if outside == 0 and wrong == 0 and lost == 0 and calls > 0 and faults else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos --fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--clients", type=int, default=3, help="SDK clients per era")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between faults")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if not 2 <= args.replicas <= 16 or not 0 < args.seconds <= 3600 or not 0.5 <= args.every <= 600:
        parser.error("--replicas 2..16 (one must be alive), --seconds up to 3600, --every 0.5..600")
    try:
        with fleet_running(args.replicas, keep=False) as fleet:
            tallies, faults = trio.run(run, fleet, args)
    except FleetStartError as exc:
        print(f"fleet chaos: {exc}", file=sys.stderr)
        return 1
    report(tallies, args.seconds, args.replicas)
    return judge(tallies, faults, args.replicas)


if __name__ == "__main__":
    sys.exit(main())
