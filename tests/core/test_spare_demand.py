"""SpareDemand (core/standby.py): how many warm spares a supervisor keeps of a component."""

from __future__ import annotations

from kernelfarm.core.standby import SpareDemand


def test_the_pool_grows_by_one_per_late_promotion_up_to_most_and_shrinks_after_the_window() -> None:
    demand = SpareDemand(base=1, most=3, window_s=10.0)
    assert demand.wanted(now=0.0) == 1
    demand.promoted(ready=True, now=1.0)  # a spare that was at its gate: one is enough
    assert demand.wanted(now=1.0) == 1
    demand.promoted(ready=False, now=2.0)
    assert demand.wanted(now=2.0) == 2
    for moment in (3.0, 4.0, 5.0):
        demand.promoted(ready=False, now=moment)
    assert demand.wanted(now=5.0) == 3  # capped
    assert demand.surplus(held=3, now=5.0) == 0
    assert demand.wanted(now=12.5) == 3  # the late promotions at 3, 4 and 5 s are still in the window
    assert demand.wanted(now=14.5) == 2  # only the one at 5 s is left
    assert demand.surplus(held=3, now=14.5) == 1
    assert demand.wanted(now=15.5) == 1 and demand.surplus(held=3, now=15.5) == 2
    assert demand.surplus(held=0, now=15.5) == 0


def test_no_spares_wanted_stays_none() -> None:
    demand = SpareDemand(base=0, most=0)
    demand.promoted(ready=False, now=0.0)
    assert demand.wanted(now=0.0) == 0
