"""Leader election on a Lease, timed by an injected clock: no sleeping, no clock agreement between replicas."""

from __future__ import annotations

import threading

import pytest

from regokite.errors import RegokiteError
from regokite.runtime.leader import LeaderElector, LeaderSettings
from tests.clocks import ManualClock
from tests.kube_api.fake import FakeKube


def elector(kube: FakeKube, identity: str, clock: ManualClock) -> LeaderElector:
    settings = LeaderSettings(name="lead", namespace="ns", identity=identity)
    return LeaderElector(kube, settings, clock=clock)  # type: ignore[arg-type]


def lead(e: LeaderElector) -> None:
    """One campaign: returns at once when the Lease can be taken."""
    assert e._acquire(threading.Event())


def test_one_holder_until_the_lease_expires_on_the_standby_clock() -> None:
    kube = FakeKube()
    ca, cb = ManualClock(), ManualClock()
    a, b = elector(kube, "a", ca), elector(kube, "b", cb)
    lead(a)
    assert a.is_leader() and a.may_act() and a.holder == "a"
    assert not b.try_acquire_or_renew() and b.knows_holder and b.holder == "a"
    cb.now += 14  # 14 s after b first saw this record: still valid
    assert not b.try_acquire_or_renew()
    ca.now += 2
    assert a.try_acquire_or_renew()  # a renews: the record changes, b's 15 s start again
    cb.now += 14
    assert not b.try_acquire_or_renew()
    cb.now += 15.5  # no renewal seen for a whole lease duration: b takes over
    assert b.try_acquire_or_renew() and b.holder == "b"
    assert not a.try_acquire_or_renew() and not a.is_leader()  # a sees the new holder and stops leading
    assert kube.stored("/apis/coordination.k8s.io/v1/namespaces/ns/leases/lead")["spec"]["leaseTransitions"] == 1


def test_a_leader_that_cannot_renew_stops_acting_on_its_own_clock_before_the_lease_expires() -> None:
    kube = FakeKube()
    clock = ManualClock()
    a = elector(kube, "a", clock)
    lead(a)
    kube.fail("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lead", 500)
    clock.now += 9.9
    assert not a.try_acquire_or_renew() and a.may_act()  # one failed renewal, still inside the renew deadline
    clock.now += 0.2
    assert not a.may_act()  # 10.1 s since the last renewal was sent: stop acting, whatever the thread is doing


def test_release_hands_over_at_once() -> None:
    kube = FakeKube()
    ca, cb = ManualClock(), ManualClock()
    a, b = elector(kube, "a", ca), elector(kube, "b", cb)
    lead(a)
    assert not b.try_acquire_or_renew()
    assert a.release() and not a.is_leader()
    assert b.try_acquire_or_renew() and b.holder == "b"  # an empty holder is free, with no wait


def test_timings_that_could_give_two_leaders_are_refused() -> None:
    with pytest.raises(RegokiteError, match="greater than the renew deadline"):
        LeaderElector(FakeKube(), LeaderSettings("l", "n", "a", lease_duration=5, renew_deadline=5))  # type: ignore[arg-type]
