"""The memory axis of online PPW searched down from the top memory clock, whose cost the core
search's first probe measured (:class:`MemAxisSearch` with ``top_cost``): fed periods of a
load whose energy per unit of work is a known function of the memory clock, in virtual
time, the search must end on the cheapest clock and spend little time at dear ones."""

from __future__ import annotations

from governor.runtime.controller_base import Observation
from governor.runtime.ppw_mem_search import MEM_MIN_UNITS, MemAxisSearch

TABLE = (204.0, 408.0, 665.6, 800.0, 1065.6, 1331.2, 1600.0, 1866.0, 2133.0)  # agx-xavier's
DT_S = 0.1
UNITS = 1.5  # work per period (whole units are not needed by the search)


def _search(cost_j, top_cost=True):
    """Run the search on a load whose energy per unit at table index i is ``cost_j[i]``:
    (the index found, seconds held at each memory clock in probing order)."""
    search = MemAxisSearch(TABLE, settle_s=1.3, top_cost=cost_j[-1] if top_cost else None)
    held = []
    t = 0.0
    for _ in range(10000):
        if search.done or search.probe is None:
            break
        mhz = search.wanted_mhz
        if not held or held[-1][0] != mhz:
            held.append([mhz, 0.0])
        held[-1][1] += DT_S
        power_w = cost_j[TABLE.index(mhz)] * UNITS / DT_S
        obs = Observation(
            t_s=t, dt_s=DT_S, power_w=power_w, clock_mhz=900.0, applied_mhz=900.0,
            energy_used_j=0.0, elapsed_s=t, busy=True, board_power_w=power_w,
        )  # fmt: skip
        search.add(obs, UNITS)
        t += DT_S
    return search.best, held


def test_a_compute_bound_load_reaches_the_low_end_in_few_probes():
    # cost falls with the memory clock all the way down (the simulated Jetsons' compute load)
    cost = [1.0 + 0.01 * i for i in range(len(TABLE))]
    best, held = _search(cost)
    assert TABLE[best] == 204.0
    probed = [mhz for mhz, _ in held]
    assert len(probed) <= 4 and probed[0] == 1331.2  # the golden point first
    assert 1866.0 not in probed and 1600.0 not in probed  # no walk down from the top
    assert 2133.0 not in probed  # the top's cost is reused, not measured again


def test_a_memory_bound_load_keeps_the_top_after_two_short_probes():
    # cost rises steeply as the memory clock falls (bandwidth-bound time ~ 1/m)
    cost = [1.0 + 2133.0 / m - 1.0 for m in TABLE]
    best, held = _search(cost)
    assert TABLE[best] == 2133.0
    assert [mhz for mhz, _ in held] == [1331.2, 1866.0]
    full_s = 1.3 + MEM_MIN_UNITS / UNITS * DT_S
    assert all(s < 0.5 * full_s for _, s in held)  # both cut short as clearly dearer


def test_an_interior_minimum_is_found():
    cost = [1.3, 1.2, 1.1, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25]
    best, _ = _search(cost)
    assert TABLE[best] == 800.0


def test_without_the_tops_cost_the_golden_section_is_kept():
    cost = [1.3, 1.2, 1.1, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25]
    best, held = _search(cost, top_cost=False)
    assert TABLE[best] == 800.0 and held[0][0] == 1331.2
