"""The throughput search's window cost on a counter board: the frames' jitter moves a
window's busy share, and the window's power is moved to the long-run share along its rise
with the busy share, fitted over the window's own periods. Driven with synthetic periods (no
simulator in the loop: deterministic and fast)."""

from __future__ import annotations

from frame_loop import RATE_HZ, drive

from governor.devices.sim.catalog import get_board
from governor.runtime.controllers import ThroughputController
from governor.runtime.model import model_from_profile
from governor.runtime.policies import Throughput

LOAD = 0.45  # of a frame period at the top clock


def test_a_window_s_cost_does_not_lean_on_a_wrong_idle_power(profile_of):
    """A100 SXM whose busy power is 3 % above the model's: the idle power the controller
    learns between frames, ``(P − b·P_model)/(1 − b)``, takes that 3 % as idle power (several
    W too high). A search window's cost at the long-run busy share must still be the board's
    own (its idle power plus the share times its busy power over idle), which the learnt
    idle power alone gives only within the window's jitter times its error."""
    model = model_from_profile(get_board("a100-sxm").clocks_mhz, profile_of("a100-sxm"))
    ctl = ThroughputController(model, Throughput(rate_hz=RATE_HZ), search=True)
    idle_w = 0.8 * model.idle_w

    def busy_w(clock):
        return 1.03 * model.power_at(clock)

    def power_of(clock, busy, t):
        return busy * busy_w(clock) + (1.0 - busy) * idle_w

    calls = []
    rate_cost = ctl.pricing.rate_cost

    def recorded(i, mean_w, busy, slope_w=None, time_rel=None):
        cost = rate_cost(i, mean_w, busy, slope_w, time_rel)
        if slope_w is not None:
            assert abs(time_rel / model.time_rel[i] - 1.0) < 1e-12  # a window at one clock
            share = RATE_HZ * ctl.frames.unit_mean * model.time_rel[i]
            true_w = idle_w + share * (busy_w(model.clocks_mhz[i]) - idle_w)
            calls.append((cost, rate_cost(i, mean_w, busy), true_w, ctl.idle_w))
        return cost

    ctl.pricing.rate_cost = recorded
    drive(ctl, power_of, 60.0, LOAD)
    assert len(calls) >= 5  # search windows fitted
    assert all(learnt > idle_w + 1.0 for *_, learnt in calls)  # the learnt idle is off
    for cost, _, true_w, _ in calls:
        assert abs(cost / true_w - 1.0) < 2e-5, (cost, true_w)
    # the learnt idle power alone would have been off by more than neighbours differ
    assert max(abs(old / true_w - 1.0) for _, old, true_w, _ in calls) > 2e-4
