"""The memory clock as the throughput policy's second knob (issue 48 item 5).

The battery knob (:mod:`.mem_knob`) tests the lower memory clock for a period and reads the
power: a compute-bound load's work does not slow at a lower memory clock, a memory-bound
one's does. The throughput policy has what the battery policy lacks, each frame's measured
busy time (``gov.tick(units, busy_s)``), so its knob reads the time itself:

- at the default memory clock, the frames' time per unit is remembered per core clock (the
  last ``REF_FRAMES`` at each);
- once the frames have been busy ``FIRST_TEST_S`` seconds there (busy seconds: the frames'
  own, as reported), and the core clock held has a fresh
  reference, the lower memory clock is tried (the profile's pair's where it keeps one below
  the default, else the table's next clock down);
- each frame at the lower memory clock is judged as it is reported (:meth:`frame`, from
  ``Governor.tick``, not at the next control period): a frame that ran late or took more
  than ``FAIL_RISE`` over its core clock's reference puts the default memory clock back at
  once; after ``TEST_FRAMES`` frames at the held core clock their mean time per unit must
  be within noise of the reference (``NOISE_SIGMAS`` standard errors of the reference
  frames' spread, plus ``NOISE_FLOOR``) for the lower memory clock to be kept;
- a failed test waits ``RETEST_S[0]`` busy seconds before the next one, doubling to
  ``RETEST_S[1]`` (a memory-bound load pays a late frame or two per test); while the lower
  memory clock is held, a late frame, or frames slower by ``FAIL_RISE`` than those at the
  lower memory clock and the same core clock (the load changed), bring the default back at
  once, and every ``RECHECK_S`` it goes back for the references to be taken afresh.

The deadline a frame must meet is the throughput controller's (:attr:`.MemoryHints.unit_deadline_s`,
one period of the rate per unit); the core clock stays the controller's to choose. Every
memory-clock change goes through ``Device.lock_mem_clock`` (journaled in the governor's
layer, restored with it), as the other knob's.
"""

from __future__ import annotations

import collections
import math
from typing import TYPE_CHECKING, Callable, Deque, Dict, Optional, Tuple

from governor.errors import GovernorError
from governor.runtime.mem_knob import MemoryKnob, settable_mem_clocks

if TYPE_CHECKING:
    from governor.devices.base import Device
    from governor.runtime.controller_base import Controller, Observation, Tick

__all__ = ["FrameMemoryKnob", "frame_knob", "lower_mem_mhz"]

FIRST_TEST_S = 2.0  # busy seconds at the default memory clock before a test
RETEST_S = (30.0, 240.0)  # after a failed test: the first wait, and the longest (doubling)
RECHECK_S = 10.0  # busy seconds at the lower memory clock before the references are renewed
REF_FRAMES = 30  # frames remembered per core clock at the default memory clock
MIN_REF = 6  # frames a reference needs
REF_AGE_S = 3.0  # the oldest reference frame a test compares with (s)
TEST_FRAMES = 6  # frames at the lower memory clock before its verdict
FAIL_RISE = 0.25  # one frame this much slower than its reference: memory-bound, at once
NOISE_SIGMAS = 2.0  # the test's mean may exceed the reference by this many standard errors
NOISE_FLOOR = 0.005  # and by this share (the reference's own mean is estimated)


def lower_mem_mhz(
    table_mhz: Tuple[float, ...], default_mhz: float, pair_mhz: Optional[float]
) -> float:
    """The memory clock the throughput knob tries: the pair's where it is below the default,
    else the table's next clock below the default (the default itself where none is)."""
    if pair_mhz is not None and pair_mhz < default_mhz:
        return float(pair_mhz)
    below = [m for m in table_mhz if m < default_mhz]
    return float(below[-1]) if below else default_mhz


def frame_knob(
    device: Device, pair_mem_mhz: Optional[float], owned: bool
) -> Optional[FrameMemoryKnob]:
    """The throughput policy's memory knob on ``device`` (None where the memory clock may not
    be governed: :func:`.settable_mem_clocks`, or no clock below the default)."""
    found = settable_mem_clocks(device, owned)
    if found is None:
        return None
    table, default = found
    low = lower_mem_mhz(table, default, pair_mem_mhz)
    return FrameMemoryKnob(device, table, default, low) if low < default else None


class FrameMemoryKnob(MemoryKnob):
    """The memory clock beside a throughput controller's core clock (see the module)."""

    def __init__(
        self, device: Device, table_mhz: Tuple[float, ...], default_mhz: float, low_mhz: float
    ) -> None:
        super().__init__(device, table_mhz, default_mhz, low_mhz)
        # per core clock: the last frames' time per unit at the default memory clock, and
        # when the latest came
        self.ref_frames: Dict[float, Deque[float]] = {}
        self.ref_t: Dict[float, float] = {}
        self.test_frames: Deque[float] = collections.deque()
        self.test_mhz: Optional[float] = None  # the core clock a test compares at
        self.low_means: Dict[float, float] = {}  # per core clock, at the lower memory clock
        self.tests = self.failed = 0

    def adjust(self, obs: Observation, controller: Controller) -> Observation:
        """The throughput controller sees every period as measured: its frames are timed."""
        self.raw = obs
        return obs

    def keep(self, policy_name: str) -> Optional[MemoryKnob]:
        if policy_name == "throughput":
            return self
        self.apply(self.default_mhz)
        return None

    def step(self, controller: Controller, obs: Observation, note: Callable[[str], None]) -> float:
        """The control period's part: a test started when due, the periodic return to the
        default; a refusal said once through ``note`` and the core clock alone from then."""
        if self.off:
            return self.mem_mhz
        try:
            self.apply(self._periodic(obs))
        except GovernorError as err:
            note(f"the memory clock could not be set ({err}): the core clock alone from now")
            self.off = True
        return self.mem_mhz

    def _periodic(self, obs: Observation) -> float:
        if self.mem_mhz == self.default_mhz:
            ref = self.ref_frames.get(obs.applied_mhz)
            fresh = ref is not None and obs.t_s - self.ref_t[obs.applied_mhz] <= REF_AGE_S
            if self.low_mhz < self.default_mhz and self.default_s >= self.wait_s - 1e-9:
                if fresh and ref is not None and len(ref) >= MIN_REF:
                    self.test_mhz, self.verified = obs.applied_mhz, False
                    self.test_frames.clear()
                    self.tests += 1
                    return self.low_mhz
            return self.default_mhz
        if self.verified:
            if self.low_s >= RECHECK_S - 1e-9:  # the references taken afresh, then again
                return self._back(0.0, clear=True)
        return self.mem_mhz

    def frame(self, controller: Controller, tick: Tick) -> Optional[float]:
        """One frame as the app reports it: remembered at the default memory clock, judged
        at the lower one (see the module). Returns the memory clock set now, None when it
        did not change."""
        if self.off or tick.busy_s is None or tick.units <= 0:
            return None
        per_unit = tick.busy_s / tick.units
        f = tick.applied_mhz
        if self.mem_mhz == self.default_mhz:
            frames = self.ref_frames.setdefault(f, collections.deque(maxlen=REF_FRAMES))
            frames.append(per_unit)
            self.ref_t[f] = tick.t_s
            self.default_s += tick.busy_s
            return None
        if self.mem_mhz != self.low_mhz:
            return None
        deadline = controller.memory_hints().unit_deadline_s
        late = deadline is not None and per_unit > deadline
        self.low_s += tick.busy_s
        target = self._verdict(per_unit, f, late)
        if target == self.mem_mhz:
            return None
        try:
            self.apply(target)
        except GovernorError:
            self.off = True  # said by the next step's refusal (the clock stays)
            return None
        return self.mem_mhz

    def _verdict(self, per_unit: float, f: float, late: bool) -> float:
        """The memory clock after one frame at the lower one."""
        if not self.verified:
            if f != self.test_mhz:
                return self.low_mhz  # the core clock moved: only frames at its clock count
            ref = self.ref_frames[f]
            mean = sum(ref) / len(ref)
            if late or per_unit > mean * (1.0 + FAIL_RISE):
                return self._fail()
            self.test_frames.append(per_unit)
            if len(self.test_frames) < TEST_FRAMES:
                return self.low_mhz
            sd = math.sqrt(sum((x - mean) ** 2 for x in ref) / (len(ref) - 1))
            test = sum(self.test_frames) / len(self.test_frames)
            allowed = mean * (1.0 + NOISE_FLOOR) + NOISE_SIGMAS * sd / math.sqrt(len(ref))
            if test > allowed + NOISE_SIGMAS * sd / math.sqrt(len(self.test_frames)):
                return self._fail()
            self.verified, self.wait_s, self.low_s = True, FIRST_TEST_S, 0.0
            self.low_means = {f: test}
            return self.low_mhz
        held = self.low_means.get(f)
        if late or (held is not None and per_unit > held * (1.0 + FAIL_RISE)):
            return self._back(FIRST_TEST_S, clear=True)  # a late frame, or the load changed
        self.low_means[f] = per_unit if held is None else held + 0.1 * (per_unit - held)
        return self.low_mhz

    def _fail(self) -> float:
        self.failed += 1
        wait = RETEST_S[0] if self.wait_s < RETEST_S[0] else min(RETEST_S[1], 2 * self.wait_s)
        return self._back(wait, clear=False)

    def _back(self, wait_s: float, *, clear: bool) -> float:
        """The default memory clock, a test due after ``wait_s`` busy seconds there (its
        references renewed first where ``clear``)."""
        self.verified, self.test_mhz = False, None
        self.default_s, self.wait_s = 0.0, max(wait_s, MIN_REF / 30.0)
        if clear:
            self.ref_frames.clear()
            self.ref_t.clear()
        return self.default_mhz
