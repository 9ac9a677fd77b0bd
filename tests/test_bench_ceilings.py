"""bench.common.cpu_budget: whether a converge run was CPU-bound, and how much of its time beyond
the floor's each side's extra CPU explains (CPU seconds / cores)."""

from __future__ import annotations

from bench.common import Phase, cpu_budget


def test_a_saturated_run_charges_each_sides_extra_cpu_to_the_gap() -> None:
    floor = Phase(4.0, {"etcd": 1.0, "apiserver": 3.0, "kcm": 0.2, "bench": 1.4}, machine=6.0)
    run = Phase(8.0, {"etcd": 1.4, "apiserver": 5.0, "kcm": 0.6, "controller": 4.0, "bench": 0.6}, machine=15.6)

    cores, gap = cpu_budget(floor, run, cores=2, who="regokite")

    # the floor: 6.0 / 4 s = 1.50 cores busy, its processes' 5.6 / 4 = 1.40; the run 15.6 / 8 = 1.95 of 2
    assert cores == "the floor kept 1.50 of 2 cores busy (the run's processes 1.40); regokite 1.95 (1.45): CPU-bound"
    # client: 4.6 - 1.4 = +3.2 CPU s = 1.60 s of the 4 s gap; server: 7.0 - 4.2 = +2.8 = 1.40 s;
    # others: (15.6 - 11.6) - (6.0 - 5.6) = +3.6 = 1.80 s
    assert gap == (
        "its 4.00 s beyond the floor, as CPU on 2 cores: "
        "client side (controller + bench over the floor's client) +3.2 CPU s = +1.60 s (40% of it); "
        "API server side (apiserver, etcd, kcm) +2.8 CPU s = +1.40 s (35% of it); "
        "other processes +3.6 CPU s = +1.80 s (45% of it)"
    )


def test_a_run_with_idle_cores_says_so_and_a_run_faster_than_the_floor_has_no_share() -> None:
    floor = Phase(4.0, {"apiserver": 3.0, "bench": 1.0}, machine=4.0)
    run = Phase(3.0, {"apiserver": 2.5, "controller": 1.0}, machine=3.6)

    cores, gap = cpu_budget(floor, run, cores=2, who="kopf")

    assert cores.endswith("kopf 1.20 (1.17): not CPU-bound (under 90% of the cores)")
    assert gap.startswith("its -1.00 s beyond the floor, as CPU on 2 cores (at most: the run was not CPU-bound): ")
    assert "of it)" not in gap
