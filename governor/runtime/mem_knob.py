"""The memory clock as the battery and power-cap policies' second knob (issue 48 item 5).

The battery controller chooses the core clock for its power plan as it does on a board with
one knob; this part chooses the memory clock beside it, from what the controller knows of
the load now:

- busy on a load the controller reads as compute-bound (its memory share from power,
  :class:`.ShareEstimator`, no more than ``SHARE_SAME``): the memory clock of the profile's
  (core, memory) pair (``tuning.ppw-pair.<load>``, found by ``governor calibrate`` on the
  compute-bound calibration load: :mod:`governor.models.memory` says a compute-bound load's
  time does not depend on the memory clock while the memory's background power falls with
  it), so the watts the memory no longer draws go to the core clock;
- busy on a memory-bound load: the default memory clock (a memory-bound load's time grows
  as the memory clock falls; a lower core clock is what the controller gives it);
- in a wait (:meth:`.BurstStats.waiting`): the lowest memory clock, the least the board can
  idle at; in a gap between bursts, the memory clock stays.

The controller keeps its one-knob model: the power of a busy period at a lower memory clock
is given to it as it would have been at the default memory clock (the drop measured at the
first switch, against the controller's corrected model at the clock that ran), so its
share estimate and power correction read the load, not the memory clock; the budget is
metered as it is spent, so the watts saved stay in it and the plan gives them to the core
clock. Every memory-clock change goes through ``Device.lock_mem_clock``: journaled in the
governor's layer first, restored when the governor releases the device, and undone by
``governor reset`` after a ``kill -9``.

Under the power-cap policy (:meth:`MemoryKnob.capped_adjust`) the same test tells the
phases apart, and the watts a compute-bound phase's lower memory clock saves go to the core
clock under the same cap: the cap controller sees the power as measured (its correction
falls, its clock rises), and the memory clock is chosen before the controller chooses the
core clock, so that a return to the default memory clock (a check, a failed test) raises
the controller's corrected power by the drop first and the core clock it chooses for that
period already fits the cap. A compute-bound test that passes lowers the corrected power by
most of the drop it measured at once. Only with the profile's pair (a lower memory clock with its
probes); without one the power-cap policy governs the core clock alone, as before.

The knob reads a controller only through the typed part of :class:`.Controller` made for
it: :meth:`~.Controller.memory_hints` (a :class:`.MemoryHints`: the memory share the battery
controller reads, whether its plan reads an idle run as a wait, the memory clock online PPW's
search holds), :meth:`~.Controller.offer_mem_clocks` (the table, to a controller that
searches the memory axis itself) and :meth:`~.Controller.shift_power` (the memory clock's
change of the draw, into the power-cap controller's correction); every controller answers
them (the defaults: no estimate, no wait, nothing searched, nothing corrected).

Active only where the memory clock can be set, the board offers several, and nobody pinned
it (no memory-clock lock held: ``governor run --mem-clock`` or ``apply --mem-clock`` pin it,
and the policy then governs the core clock alone, the core-only baseline).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple

from governor.errors import GovernorError

if TYPE_CHECKING:
    from governor.devices.base import Device
    from governor.runtime.controller_base import Controller, Observation, Tick
    from governor.runtime.model import ClockModel

__all__ = ["MemoryKnob", "memory_knob", "settable_mem_clocks"]

SHARE_UP = 0.04  # a memory share the controller reads above this: memory-bound, no test
FIRST_TEST_S = 2.0  # busy seconds at the default memory clock before the first test
RETEST_S = (20.0, 160.0)  # after a failed test: the first wait, and the longest (doubling)
RECHECK_S = 2.0  # busy seconds at the lower memory clock between two checks
TEST_SETTLE = 0  # periods a test waits at the lower memory clock before it reads
TEST_PERIODS = 1  # periods a test waits for a core clock it has a reference at
REF_AGE_S = 3.0  # the oldest reference a test compares with (s)
# below this share of the top core clock a memory-bound load's drop comes near a
# compute-bound one's (the SMs draw little either way: tx2 at 115 MHz, 1.2 times): no test
TEST_FLOOR = 0.25
DROP_MARGIN = 1.6  # a drop this many times the calibration load's says memory-bound
# under the power cap: a busy period at the default memory clock whose power at one core clock
# moved by this many times the calibration load's drop from the last one: the load changed,
# a lower memory clock is tested again soon (the cap controller has no share estimate)
LOAD_STEP = 2.0
DOWN_SHARE = 0.8  # of a passed test's drop, given to the cap controller's correction at once


class MemoryKnob:
    """The memory clock beside a battery controller's core clock (see the module)."""

    def __init__(
        self,
        device: Device,
        table_mhz: Tuple[float, ...],
        default_mhz: float,
        low_mhz: float,
        drop_w: Optional[float] = None,
    ) -> None:
        self.device = device
        self.table_mhz = table_mhz
        self.default_mhz = default_mhz
        self.low_mhz = low_mhz  # the busy compute-bound phase's
        self.drop_w = drop_w  # the calibration load's power drop at low_mhz (None: unknown)
        self.mem_mhz = default_mhz  # where it is now
        self.changes = 0
        self.off = False  # the device refused a memory clock: the core clock alone
        self.searched = False  # the controller searches the memory axis (online PPW)
        # the test of a lower memory clock compares busy periods at one core clock: the
        # latest at the default memory clock per core clock (time, power on the scope the
        # drop was measured on, GPU figure), and the latest at low_mhz (time, power)
        self.refs: Dict[float, Tuple[float, float, float]] = {}
        self.lows: Dict[float, Tuple[float, float]] = {}
        self.testing = 0  # periods into a test (0: none under way)
        self.verified = False  # low_mhz passed its test for the load now
        self.default_s = 0.0  # busy seconds at the default since the last test
        self.wait_s = FIRST_TEST_S  # busy seconds at the default before the next test
        self.low_s = 0.0  # busy seconds at low_mhz since the last check
        self.saved_w: Optional[float] = None  # GPU figure's drop at low_mhz (compute-bound)
        self.raw: Optional[Observation] = None  # the last period as read
        self.capped = False  # beside the power-cap controller (capped_adjust)
        self.refused: Optional[str] = None  # a refusal step() is to say (capped)

    def adjust(self, obs: Observation, controller: Controller) -> Observation:
        """``obs`` as ``controller`` is to see it, so that it reads the load, not the memory
        clock: a busy period at the lower memory clock once it passed its test has its
        power raised by the drop that memory clock brings a compute-bound load (measured
        at the tests that passed); one at another memory clock than the default (a test,
        the first after a wait) has no power reading for the controller to learn from (the
        budget meters the energy all the same)."""
        if self.capped:
            return self.capped_adjust(obs, controller)
        self.raw = obs  # what the device read: the knob's own decision reads it
        if self.off or self.searched or obs.busy is False or obs.power_w is None:
            return obs
        if self.mem_mhz == self.default_mhz:
            return obs
        if self.mem_mhz == self.low_mhz and self.verified and not self.testing:
            return dataclasses.replace(obs, power_w=obs.power_w + (self.saved_w or 0.0))
        return dataclasses.replace(obs, power_w=None)

    def capped_adjust(self, obs: Observation, controller: Controller) -> Observation:
        """Under the power cap: the memory clock for the next period chosen and set now,
        before the controller chooses the core clock, and ``obs`` as the controller is to
        see it (see the module). Going back to the default memory clock, the controller's
        corrected power rises by the drop (the period just read is shown as it would have
        drawn at the default), so the core clock it chooses fits the cap at the higher
        memory clock; a test that passes lowers it by the drop it measured."""
        self.raw = obs
        if self.off:
            return obs
        before, verified = self.mem_mhz, self.verified
        chosen = self.choose(controller, obs)
        try:
            self.apply(chosen)
        except GovernorError as err:
            self.refused = (
                f"the memory clock could not be set ({err}): the core clock alone from now"
            )
            self.off = True
            return obs
        if obs.power_w is None or obs.busy is False:
            return obs
        if chosen > before:  # up: what the lower memory clock saved comes back at once
            ref = self.refs.get(obs.applied_mhz)
            measured = ref[2] - obs.power_w if ref is not None and before == self.low_mhz else 0.0
            # the controller's correction learned the lower memory clock only once it passed
            # its test (a failed test's period is shown to it as at the default)
            up_w = (self.saved_w or 0.0) if verified else 0.0
            if verified and self.wait_s == FIRST_TEST_S:  # the load fell: memory-bound now,
                self.refs.clear()  # not tested again before the first retest's wait
                self.wait_s = RETEST_S[0]
            controller.shift_power(obs.applied_mhz, up_w)
            shown_w = max(up_w, measured) if (up_w or measured > 0) else (self.drop_w or 0.0)
            return dataclasses.replace(obs, power_w=obs.power_w + shown_w)
        if self.verified and not verified and self.saved_w:  # a test passed: most of the
            # watts saved go to the core clock now (the drop varies a little with the core
            # clock; the correction learns the rest)
            controller.shift_power(obs.applied_mhz, -DOWN_SHARE * self.saved_w)
        return obs

    def choose(self, controller: Controller, obs: Observation) -> float:
        """The memory clock for the next period (see the module), from what ``controller``
        tells of the load (:meth:`.Controller.memory_hints`); a controller that searches the
        memory axis itself (online PPW: ``wanted_mhz``) is offered the table and followed."""
        if self.searched:
            controller.offer_mem_clocks(self.table_mhz)
            wanted = controller.memory_hints().wanted_mhz
            return self.mem_mhz if wanted is None else float(wanted)
        if self.raw is not None and self.raw.t_s == obs.t_s:
            obs = self.raw  # the period as read, not as the controller was shown it
        if obs.busy is False:
            self.refs.clear()  # the load after a pause may be another
            self.verified = False
            self.lows.clear()
            self.testing = 0
            if controller.memory_hints().waiting:
                return self.table_mhz[0]
            return self.mem_mhz
        power = obs.board_power_w if obs.board_power_w is not None else obs.power_w
        if power is None or obs.power_w is None or self.drop_w is None:
            return self.default_mhz
        if self.mem_mhz == self.default_mhz:
            return self._at_default(controller, obs, power)
        if self.mem_mhz != self.low_mhz or not (self.verified or self.testing):
            # (a wait's lowest clock): as at the start
            self.default_s = 0.0
            return self.default_mhz
        return self._at_low(obs, power)

    def _at_default(self, controller: Controller, obs: Observation, power: float) -> float:
        """A busy period at the default memory clock: the reference at its core clock, and
        a test of the lower memory clock once due (never for a load the controller reads
        memory-bound)."""
        assert obs.power_w is not None
        last = self.refs.get(obs.applied_mhz)
        if (
            self.capped
            and self.drop_w is not None
            and last is not None
            and obs.t_s - last[0] <= REF_AGE_S
            and abs(power - last[1]) > LOAD_STEP * self.drop_w + 0.02 * power
        ):
            self.wait_s = min(self.wait_s, FIRST_TEST_S)  # the load changed: tested soon
            self.default_s = 0.0
        self.refs[obs.applied_mhz] = (obs.t_s, power, obs.power_w)
        self.default_s += obs.dt_s
        k = controller.memory_hints().memory_share
        if self.low_mhz >= self.default_mhz or (k is not None and k > SHARE_UP):
            return self.default_mhz
        if self.default_s < self.wait_s - 1e-9:
            return self.default_mhz
        if obs.applied_mhz < TEST_FLOOR * controller.model.top_mhz:
            return self.default_mhz  # near the bottom of the table the drops are alike
        self.testing = 1
        return self.low_mhz

    def _at_low(self, obs: Observation, power: float) -> float:
        """A busy period at the lower memory clock: the test's verdict against the latest
        period at the default memory clock and this core clock (a drop well beyond the
        calibration load's is a memory-bound load slowed down: back to the default, tested
        again later), a sudden fall at one core clock (the load changed), or the periodic
        check."""
        assert self.drop_w is not None and obs.power_w is not None
        f, now = obs.applied_mhz, obs.t_s
        if self.testing:
            self.testing += 1
            ref = self.refs.get(f)
            if self.testing <= TEST_SETTLE + 1 or ref is None or now - ref[0] > REF_AGE_S:
                if self.testing > TEST_PERIODS:  # no period at a clock to compare with
                    self.testing = 0
                    self.default_s = 0.0
                    return self.default_mhz
                return self.low_mhz
            self.testing = 0
            if ref[1] - power > DROP_MARGIN * self.drop_w + 0.01 * ref[1]:
                self.default_s = 0.0
                self.wait_s = min(RETEST_S[1], max(RETEST_S[0], 2.0 * self.wait_s))
                return self.default_mhz
            saved = max(0.0, ref[2] - obs.power_w)
            self.saved_w = saved if self.saved_w is None else 0.8 * self.saved_w + 0.2 * saved
            self.wait_s = self.low_s = 0.0
            self.verified = True
            self.lows = {f: (now, power)}
            return self.low_mhz
        self.low_s += obs.dt_s
        prev = self.lows.get(f)
        self.lows[f] = (now, power)
        fell = (
            prev is not None
            and now - prev[0] <= REF_AGE_S
            and (prev[1] - power > self.drop_w + 0.02 * power)
        )
        if fell or self.low_s >= RECHECK_S - 1e-9:  # back for a period (the load changed:
            self.default_s = 0.0  # a while), then tested again
            self.verified = False
            self.wait_s = FIRST_TEST_S if fell else 0.0
            return self.default_mhz
        return self.low_mhz

    def step(self, controller: Controller, obs: Observation, note: Callable[[str], None]) -> float:
        """Choose and set the memory clock for the next period; returns the memory clock the
        board is at (MHz). Where the device refuses it, said once through ``note``, and the
        core clock goes on alone (the memory clock stays where it is, its lock in the
        governor's layer)."""
        if self.refused is not None:
            note(self.refused)
            self.refused = None
        if self.off or self.capped:  # (capped: set in capped_adjust, before the core clock)
            return self.mem_mhz
        try:
            self.apply(self.choose(controller, obs))
        except GovernorError as err:
            note(f"the memory clock could not be set ({err}): the core clock alone from now")
            self.off = True
        return self.mem_mhz

    def keep(self, policy_name: str) -> Optional[MemoryKnob]:
        """This knob under a new policy: itself for the policy it serves (battery, power
        cap, online PPW); for another, the memory clock back at the default (its lock stays in the governor's layer, restored
        with it) and None."""
        mine = "ppw" if self.searched else "power-cap" if self.capped else "battery"
        if policy_name == mine:
            return self
        self.apply(self.default_mhz)
        return None

    def frame(self, controller: Controller, tick: Tick) -> bool:
        """One frame as the app reports it (the throughput knob judges it, :mod:`.mem_frames`):
        whether the memory clock slowed it. This knob reads periods only: False."""
        return False

    def apply(self, mem_mhz: float) -> None:
        """Lock the memory clock at ``mem_mhz`` (journaled in the governor's layer)."""
        if mem_mhz == self.mem_mhz:
            return
        self.device.lock_mem_clock(mem_mhz)
        self.mem_mhz = mem_mhz
        self.changes += 1


def memory_knob(
    device: Device, policy_name: str, model: ClockModel, *, owned: bool = False
) -> Optional[MemoryKnob]:
    """The memory knob for ``policy_name`` on ``device`` (its compute-bound memory clock
    the pair's of ``model``'s profile); None where the policy governs the core clock alone
    (not the battery policy, online PPW, or the power-cap policy with a pair below the
    default memory clock; a memory clock that cannot be set or has one value, or one
    pinned by a lock: a lock that is the governor's own, ``owned``, is no pin)."""
    pair = model.ppw_pair_mhz
    pair_mem_mhz = pair[1] if pair else None
    searched = policy_name == "ppw" and not model.fitted  # online PPW searches both
    # under the power cap, only a compute-bound phase's lower memory clock (the pair's) helps
    capped = policy_name == "power-cap" and pair_mem_mhz is not None and model.pair_drop_w
    governed = policy_name == "battery" or searched or capped
    found = settable_mem_clocks(device, owned) if governed else None
    if found is None:
        return None
    table, default = found
    low = default if pair_mem_mhz is None or pair_mem_mhz >= default else float(pair_mem_mhz)
    knob = MemoryKnob(device, table, default, low, model.pair_drop_w)
    if capped and low >= default:
        return None
    knob.searched = searched
    knob.capped = bool(capped)
    return knob


def settable_mem_clocks(device: Device, owned: bool) -> Optional[Tuple[Tuple[float, ...], float]]:
    """(the memory clocks ``device`` offers, the one it runs now) where a policy may govern
    the memory clock: it can be set, there are several, and no lock pins it (one the
    governor holds itself, ``owned``, is no pin); else None."""
    if not device.capabilities.lock_mem_clock:
        return None
    try:
        table = tuple(device.supported_mem_clocks_mhz())
        if len(table) < 2 or (not owned and device.state().mem_clock_mhz is not None):
            return None
        now = device.sample().mem_clock_mhz
    except (GovernorError, OSError):
        return None
    return None if now is None else (table, float(now))
