"""The throughput search on a cold counter board: the board warms while the search runs, so
the idle power it learns between frames starts low, and the model's pick with that idle power
sits at the voltage knee far above the deadline's floor. Driven with synthetic periods (no
simulator in the loop: deterministic and fast)."""

from __future__ import annotations

import math
import random

from frame_loop import PERIOD_S, RATE_HZ, drive

from governor.devices.sim.catalog import get_board
from governor.runtime.controllers import Observation, ThroughputController, Tick
from governor.runtime.model import model_from_profile
from governor.runtime.policies import Throughput
from governor.runtime.throughput_parts.window import YoungWindow

LOAD = 0.45  # of a frame period at the top clock


def _controller(board, profile_of, **policy):
    model = model_from_profile(get_board(board).clocks_mhz, profile_of(board))
    return ThroughputController(model, Throughput(rate_hz=RATE_HZ, **policy), search=True)


def _drive(ctl, idle_w, warming_w, seconds, tau_s=15.0, seed=0):
    """A 30 Hz frame loop on a counter board whose busy power is the model's and whose idle
    power is ``idle_w``, both lowered by a warming offset ``warming_w·exp(−t/τ)`` (the
    board's leakage rising with its temperature). Returns ``[(t_s, clock_mhz)]`` per period
    and the energy (J) of the run."""
    model = ctl.model

    def power_of(clock, busy, t):
        offset = warming_w * math.exp(-t / tau_s)
        return busy * model.power_at(clock) + (1.0 - busy) * idle_w - offset

    return drive(ctl, power_of, seconds, LOAD, seed)


def test_a_cold_board_holds_the_floor_not_the_knee_the_low_idle_power_points_to(profile_of):
    """L4: the true idle power between frames is the model's (the floor is the cheapest clock
    that keeps the rate: energy per frame is flat below the knee and idle power the same
    everywhere), but the board starts 4 W cold. The idle power learnt from the first periods
    then comes out low, and with it the model prices the knee (1530 MHz) 1-2 % under the
    floor: the old search started there and stayed 6-12 s. The duel measures the two (the
    warming cancelling between the floor's windows) and holds the floor: within 5 s no
    period runs more than two search steps above the floor, and the run costs no more than
    the floor held from the first period."""
    ctl = _controller("l4", profile_of)
    model = ctl.model
    applied, energy_j = _drive(ctl, model.idle_w, 4.0, 30.0)
    floor = model.clocks_mhz[ctl.floor_idx]  # the deadline's, learnt from the frames
    high = model.clocks_mhz[
        min(len(model.clocks_mhz) - 1, ctl.floor_idx + 2 * ctl.local_search.step + 1)
    ]
    assert ctl.local_search.costs, "the search measured nothing"
    far = [t for t, c in applied if c >= high]
    # the model with the idle power learnt early points far above the floor: the case at hand
    assert model.index(ctl.choice_mhz) > ctl.floor_idx + 2 * ctl.local_search.step
    # the pick's measured cost is trusted STALE_S, then measured again (one short window,
    # late in the run): before that, nothing far above the floor after the first 5 s
    early = [t for t in far if t < ctl.local_search.STALE_S + 5.0]
    assert max(early) <= 5.0, far
    assert len(far) * PERIOD_S <= 2.0  # the young frames', the duel's and a re-measure's
    held = ThroughputController(model, Throughput(rate_hz=RATE_HZ), search=True)
    held.decide = lambda obs, ticks, current: (floor, False)  # the floor from the start
    held.initial_mhz = lambda: floor
    _, floor_j = _drive(held, model.idle_w, 4.0, 30.0)
    assert energy_j <= floor_j * 1.001


def test_a_pick_measured_clearly_cheaper_than_the_floor_wins_the_duel(profile_of):
    """A100 PCIe with an idle power between frames 20 % under the model's intercept (the
    memory traffic a busy GPU draws): the knee is truly 2-3 % cheaper than the floor. The
    duel must not hold the floor there: after it, the search runs at the knee (within two
    search steps of the model's pick)."""
    ctl = _controller("a100-pcie", profile_of)
    model = ctl.model
    applied, _ = _drive(ctl, 0.8 * model.idle_w, 3.0, 30.0)
    pick = model.index(ctl.choice_mhz)
    assert pick > ctl.floor_idx + 2 * ctl.local_search.step  # the duel's case
    late = [model.index(c) for t, c in applied if t >= 10.0]
    assert min(late) >= pick - 2 * ctl.local_search.step - 1, (
        model.clocks_mhz[pick],
        sorted(set(late)),
    )


def test_the_first_frame_runs_at_the_ppw_clock_unless_a_margin_asks_for_none_late(profile_of):
    """The first frame's clock is a guess made before any frame is seen: the model's PPW clock
    (the cheapest per cycle flat out), not the top clock, whose one frame cost 0.02-0.03 % of
    a minute's energy on the counter boards. An explicit margin (no frame late) keeps the
    top clock."""
    learnt = _controller("a100-sxm", profile_of)
    strict = _controller("a100-sxm", profile_of, margin=0.1)
    model = learnt.model
    assert learnt.initial_mhz() == model.ppw_clock_mhz < model.top_mhz
    assert strict.initial_mhz() == model.top_mhz


def test_the_young_frames_window_at_the_pick_is_the_duel_s_first(profile_of):
    """L4 starting 4 W cold, as above, on a board whose clocks more than two search steps
    above the floor draw 3 % more busy power than the model says (the far pick clearly
    dearer than the floor, as on the simulated L4, where the two differ by 2 %): the young
    frames (before the search starts) run at the model's far pick, and their window there
    is the pick's first window in the duel. The floor measured after it (warming against
    the floor) and cheaper by more than the noise decides at once: no period at the pick
    once the floor has run (the old duel went floor, pick, floor: 0.7 s more at the dearer
    clock), and the floor is held."""
    ctl = _controller("l4", profile_of)
    model = ctl.model
    high_mhz = []

    def power_of(clock, busy, t):
        dearer = 1.03 if high_mhz and clock >= high_mhz[0] else 1.0
        offset = 4.0 * math.exp(-t / 15.0)
        return busy * model.power_at(clock) * dearer + (1.0 - busy) * model.idle_w - offset

    # the floor the frames set (the first run learns it; the board is the same)
    probe = _controller("l4", profile_of)
    _drive(probe, model.idle_w, 4.0, 5.0)
    high_mhz.append(model.clocks_mhz[probe.floor_idx + 2 * probe.local_search.step + 1])
    applied, _ = drive(ctl, power_of, 30.0, LOAD)
    floor_idx = ctl.floor_idx
    assert model.index(ctl.choice_mhz) > floor_idx + 2 * ctl.local_search.step  # the duel's case
    first_low = min(t for t, c in applied if c < high_mhz[0])
    far = [t for t, c in applied if c >= high_mhz[0]]
    assert far and min(far) < first_low  # the young frames ran at the far pick
    assert max(far) < first_low, (first_low, far)
    assert ctl.local_search.at_floor


def test_a_young_window_too_short_at_the_pick_goes_on_there_before_the_floor(profile_of):
    """V100: the young frames' pick moved late in their second (the idle power being learnt),
    so their window at it is shorter than a duel's. The duel does not leave the pick for the
    floor and come back for a whole window later: it measures on at the pick (the window so
    far kept), then the floor, and a floor measured cheaper than that window wins at once."""
    ctl = _controller("v100", profile_of)
    model = ctl.model
    _drive(ctl, model.idle_w, 4.0, 0.5)  # a cold board: the pick at the knee
    search = ctl.local_search
    seed = model.index(ctl.choice_mhz)
    assert seed > ctl.floor_idx + 2 * search.step  # the duel's case
    assert search.young is not None and search.young.clock_mhz == model.clocks_mhz[seed]
    # 0.2 s measured at the pick after its settling (a duel's window is DUEL_S = 0.5 s)
    search.young = YoungWindow(model.clocks_mhz[seed], 18.0, 0.2, 0.09, held_s=0.5)
    search.start(seed, 1.0, ctl.floor_idx)
    assert search.duel is not None and search.duel.pick == seed
    assert search.target == seed  # not the floor first
    window = search.window
    assert (window.energy_j, window.measured_s, window.busy_s, window.held_s) == (
        18.0,
        0.2,
        0.09,
        0.5,
    )
    search._duel(ctl.floor_idx, 90.0)  # the pick's window, finished
    assert search.duel.pick_w == 90.0 and search.target == ctl.floor_idx
    assert search.duel.pick == seed
    search._duel(ctl.floor_idx, 89.0)  # the floor 1.1 % cheaper: decided, no second window
    assert search.duel is None and search.at_floor and search.target == ctl.floor_idx


def test_a_duel_s_floor_window_goes_on_when_the_floor_rises(profile_of):
    """A100 PCIe as above (the knee truly cheaper than the floor): the first seconds'
    frames raise the deadline's floor a step or two while the duel measures it (their
    slowest one grows). The floor's window goes on at the floor risen instead of starting
    again (settle and all) at each rise: the floor's first window takes one window's time
    below the pick, not one per rise (the simulated A100 PCIe, seed 1: 1.4 s at a floor
    2.4 % dearer)."""
    ctl = _controller("a100-pcie", profile_of)
    model = ctl.model
    idle_w = 0.8 * model.idle_w
    rng = random.Random(0)
    clock = ctl.initial_mhz()
    energy_j, below, rises = 0.0, [], 0
    pick = None
    # the floor's first window: the clocks of the periods it measured, and the cost the
    # duel took for it (with the long-run work per frame then)
    measured, taken = [], []
    search = ctl.local_search
    rate_cost = ctl.pricing.rate_cost

    def recorded(i, mean_w, busy, slope_w=None, time_rel=None):
        cost = rate_cost(i, mean_w, busy, slope_w, time_rel)
        duel = search.duel
        if duel is not None and i != duel.pick and not duel.floor_w:
            taken.append((cost, ctl.frames.unit_mean))
        return cost

    ctl.pricing.rate_cost = recorded
    for k in range(int(round(4.0 / PERIOD_S))):
        t = PERIOD_S * (k + 1)
        measuring = pick is not None and search.duel is not None and not search.duel.floor_w
        if measuring and clock < pick:
            below.append(t)
            if search.window.held_s >= search.SETTLE_S - 1e-9:  # a period the window measures
                measured.append(clock)
        # slower frames twice while the floor's first window is measured
        load = LOAD * (1.0 + 0.04 * sum(1 for n in (2, 5) if len(below) >= n))
        frames = [load / RATE_HZ * rng.gauss(1.0, 0.05) * model.time_rel_at(clock) for _ in "abc"]
        ticks = [Tick(t - PERIOD_S + i / RATE_HZ, 1.0, s, clock) for i, s in enumerate(frames)]
        busy = min(1.0, sum(frames) / PERIOD_S)
        power = busy * model.power_at(clock) + (1.0 - busy) * idle_w
        energy_j += power * PERIOD_S
        obs = Observation(t, PERIOD_S, power, clock, clock, energy_j, t, busy > 0)
        floor_before = ctl.floor_idx
        clock, _ = ctl.decide(obs, ticks, clock)
        rises += measuring and ctl.floor_idx > floor_before
        if search.duel is not None and pick is None:
            pick = model.clocks_mhz[search.duel.pick]
    assert pick is not None  # the duel ran
    assert rises >= 2  # the floor rose twice while its first window was measured
    # one window below the pick: SETTLE_S + DUEL_S and a period or two of rounding
    window_periods = (search.SETTLE_S + search.DUEL_S) / PERIOD_S
    assert len(below) <= window_periods + 2, (len(below), below)
    # the window ran at three clocks: its cost is theirs at the long-run share, not the
    # last one's (the busier periods at the lower floors moved to the last one's share)
    assert len(taken) == 1 and len(set(measured)) >= 2
    cost, unit_mean = taken[0]

    def true_cost(clock):  # the board's at the long-run busy share
        share = RATE_HZ * unit_mean * model.time_rel_at(clock)
        return idle_w + share * (model.power_at(clock) - idle_w)

    truth = sum(true_cost(c) for c in measured) / len(measured)
    assert abs(cost / truth - 1.0) < 0.001, (cost, truth, measured)
