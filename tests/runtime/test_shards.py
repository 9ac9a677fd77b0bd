"""Sharding on membership Leases, each replica on its own injected clock: assignment, hand-over, never two writers."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from regokite.kube.client import NotLeader
from regokite.runtime.leader import LeaderSettings
from regokite.runtime.shards import SINGLETON, Shards, Verdict, lease_name, object_key, owner
from tests.clocks import ManualClock
from tests.kube_api.fake import FakeKube
from tests.waiting import GENEROUS, wait_until

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"
KEYS = [("team", f"parent-{i}") for i in range(300)]


def member(kube: FakeKube, identity: str, retry_period: float = 2.0) -> Shards:
    settings = LeaderSettings(name="ctl", namespace="ns", identity=identity, retry_period=retry_period)
    shards = Shards(kube, settings, clock=ManualClock())  # type: ignore[arg-type]
    shards.keys = lambda: KEYS
    return shards


def clock(s: Shards) -> ManualClock:
    assert isinstance(s.clock, ManualClock)
    return s.clock


def verdicts(s: Shards) -> dict[tuple[str, str], Verdict]:
    out = {}
    for key in KEYS:
        out[key] = v = s.begin(*key)
        if v is Verdict.MINE:
            s.end()
    return out


def acting(*members: Shards) -> Counter[tuple[str, str]]:
    """How many members would act on each key now: never more than one."""
    count: Counter[tuple[str, str]] = Counter()
    for s in members:
        for key, v in verdicts(s).items():
            count[key] += v is Verdict.MINE
    assert max(count.values(), default=0) <= 1, [k for k, n in count.items() if n > 1][:5]
    return count


def test_rendezvous_moves_only_the_share_of_the_member_that_joins_or_leaves() -> None:
    keys = [object_key(*k) for k in KEYS]
    two = {k: owner(k, ["a", "b"]) for k in keys}
    three = {k: owner(k, ["a", "b", "c"]) for k in keys}
    moved = [k for k in keys if two[k] != three[k]]
    assert all(three[k] == "c" for k in moved)  # only to the newcomer
    assert 70 < len(moved) < 130  # about a third
    assert {k: owner(k, ["c", "b", "a"]) for k in keys} == three  # order does not matter
    assert Counter(three.values()).keys() == {"a", "b", "c"}
    assert owner("x", []) is None


def test_lease_names_are_valid_object_names_and_distinct() -> None:
    assert lease_name("ctl", "pod-7f9c") == "ctl-pod-7f9c"
    a, b = lease_name("ctl", "Host_ab12"), lease_name("ctl", "host-ab12")
    assert a != b and a.startswith("ctl-host-ab12-")


def test_three_members_split_every_object_exactly_once() -> None:
    kube = FakeKube()
    a, b, c = (member(kube, x) for x in "abc")
    for s in (a, b, c):
        assert not s.may_act() and s.begin("team", "parent-0") is Verdict.WAIT
    for _ in range(3):  # join, see each other, see each other's views
        for s in (a, b, c):
            s.tick()
    assert all(s.may_act() and s.agreed() and s.members() == ("a", "b", "c") for s in (a, b, c))
    count = acting(a, b, c)
    assert set(count.values()) == {1}  # every key has exactly one owner
    shares = [a.owned(), b.owned(), c.owned()]
    assert sum(shares) == len(KEYS) and min(shares) > 70
    assert kube.stored(f"{LEASES}/ctl-a")["metadata"]["labels"] == {"regokite.io/shard-group": "ctl"}


def test_a_joining_member_waits_until_every_old_owner_has_published_the_new_view() -> None:
    kube = FakeKube()
    a, b = member(kube, "a"), member(kube, "b")
    for _ in range(3):
        a.tick(), b.tick()
    resyncs = []
    a.on_view_change.append(lambda only: resyncs.append(only is not None))
    c = member(kube, "c")
    c.tick()  # c publishes [a, b, c]: a and b still claim c's share under [a, b]
    assert c.may_act() and not c.agreed()
    ours = {k for k in KEYS if owner(object_key(*k), ["a", "b", "c"]) == "c"}
    assert all(verdicts(c)[k] is Verdict.WAIT for k in ours)
    acting(a, b, c)
    a.tick()  # a gives its part of c's share away (nothing in flight: no wait)
    assert a.members() == ("a", "b", "c") and resyncs == [True]  # only what came to a (nothing)
    from_a = {k for k in ours if owner(object_key(*k), ["a", "b"]) == "a"}
    from_b = ours - from_a
    acting(a, b, c)
    c.tick()  # c reads a's new view
    v = verdicts(c)
    assert all(v[k] is Verdict.MINE for k in from_a) and all(v[k] is Verdict.WAIT for k in from_b)
    acting(a, b, c)
    b.tick()
    acting(a, b, c)
    c.tick()
    assert set(acting(a, b, c).values()) == {1}
    assert all(verdicts(c)[k] is Verdict.MINE for k in ours)


def test_a_member_gives_objects_away_only_after_its_in_flight_syncs_finish() -> None:
    kube = FakeKube()
    a = member(kube, "a", retry_period=0.05)
    a.tick(), a.tick()
    busy = next(k for k in KEYS if owner(object_key(*k), ["a", "c"]) == "c")
    assert a.begin(*busy) is Verdict.MINE  # a sync in flight on an object about to move
    c = member(kube, "c")
    c.tick()
    moving = threading.Thread(target=a.tick)
    moving.start()
    wait_until(lambda: a.paused, what="a pauses to give objects away")
    assert moving.is_alive()  # waiting for the sync; no new one starts
    renewals = kube.calls.count(("PUT", f"{LEASES}/ctl-a"))
    # a long sync does not let a's Lease expire: it renews while it waits
    wait_until(lambda: kube.calls.count(("PUT", f"{LEASES}/ctl-a")) > renewals, what="a renewal during the wait")
    assert moving.is_alive() and a.paused
    assert a.begin(*KEYS[0]) is Verdict.WAIT
    c.tick()
    assert c.begin(*busy) is Verdict.WAIT  # a still publishes the old view: c must not act
    a.end()
    moving.join(GENEROUS)
    assert not moving.is_alive() and not a.paused
    c.tick()
    assert c.begin(*busy) is Verdict.MINE and a.begin(*busy) is Verdict.OTHER


def test_a_member_that_cannot_renew_stops_before_the_others_take_over_and_waits_when_back() -> None:
    kube = FakeKube()
    a, b = member(kube, "a"), member(kube, "b")
    for _ in range(3):
        a.tick(), b.tick()
    for _ in range(20):
        kube.fail("PUT", f"{LEASES}/ctl-a", 500)
    clock(a).now += 9
    a.tick()  # a failed renewal, 9 s after the last: still within the 10 s renew deadline
    assert a.may_act()
    clock(a).now += 1.5
    a.tick()
    assert not a.may_act() and all(v is Verdict.WAIT for v in verdicts(a).values())
    with pytest.raises(NotLeader):
        a.guard("PATCH", "/api/v1/namespaces/team/configmaps/x")
    clock(b).now += 14
    b.tick()
    assert b.members() == ("a", "b")  # 14 s of silence: a may still be acting by b's reckoning
    clock(b).now += 1.5
    b.tick()
    assert b.members() == ("b",) and b.owned() == len(KEYS)
    kube.errors.clear()
    a.tick()  # a is back: it publishes [a, b], reads b's claim on everything, and waits
    assert a.may_act() and Verdict.MINE not in verdicts(a).values()
    acting(a, b)
    b.tick()  # b sees a alive again and gives its share back
    acting(a, b)
    a.tick()
    assert set(acting(a, b).values()) == {1}


def test_release_hands_over_on_the_next_round_and_old_leases_are_deleted() -> None:
    kube = FakeKube()
    a, b = member(kube, "a"), member(kube, "b")
    for _ in range(3):
        a.tick(), b.tick()
    a.release()
    assert not a.may_act()
    b.tick()
    assert b.members() == ("b",) and b.owned() == len(KEYS)
    assert set(acting(a, b).values()) == {1}
    clock(b).now += 4 * 15 + 1
    b.tick()
    assert kube.stored(f"{LEASES}/ctl-a") is None and kube.stored(f"{LEASES}/ctl-b") is not None


def test_exactly_one_member_does_the_leader_only_work() -> None:
    kube = FakeKube()
    members = [member(kube, x) for x in "abc"]
    for _ in range(3):
        for s in members:
            s.tick()
    mine = [s for s in members if s.begin(*SINGLETON) is Verdict.MINE]
    assert len(mine) == 1


def test_a_view_that_cannot_be_published_stops_acting_until_a_round_publishes_and_reads() -> None:
    kube = FakeKube()
    a = member(kube, "a")
    a.tick(), a.tick()
    member(kube, "c").tick()
    kube.fail("PUT", f"{LEASES}/ctl-a", 500, after=1)  # the renewal passes, the new view's write fails
    a.tick()
    assert not a.may_act() and a.members() == ("a", "c")
    a.tick()
    assert a.may_act() and a.describe()["view"] == ["a", "c"]


def test_a_lapse_slept_through_resyncs_everything_when_acting_again() -> None:
    kube = FakeKube()
    a = member(kube, "a")
    a.tick(), a.tick()
    resyncs: list[object] = []
    a.on_view_change.append(resyncs.append)
    clock(a).now += 11  # the round thread was stuck past the renew deadline: events may have been missed
    assert not a.may_act()
    a.tick()
    assert a.may_act() and resyncs == [None]  # None: every object, not only newly owned ones


def test_timings_that_could_give_two_writers_are_refused() -> None:
    from regokite.errors import RegokiteError

    settings = LeaderSettings(name="ctl", namespace="ns", identity="a", lease_duration=5, renew_deadline=5)
    with pytest.raises(RegokiteError, match="greater than the renew deadline"):
        Shards(FakeKube(), settings)  # type: ignore[arg-type]
