"""A seeded, bounded fuzz run in the suite: hostile reviews never crash, 5xx or leak.

`python -m bench.admission_fuzz --count 10000` runs the same classes at scale.
"""

from __future__ import annotations

from tests.admission.fuzz import CLASSES, run


def test_hostile_reviews_get_a_review_or_a_4xx_and_the_workers_live_on() -> None:
    report = run(seed=14, count=40 * len(CLASSES), workers_n=2)
    print(report.render())
    assert report.check() == []
    assert {kind for kind, _ in report.histogram} == {make.__name__.replace("_", "-") for make in CLASSES}
    assert report.statuses[200] > 0 and report.statuses[400] > 0
