"""The memory clock as the throughput policy's second knob (issue 48 item 5).

The battery knob (:mod:`.mem_knob`) tests the lower memory clock for a period and reads the
power: a compute-bound load's work does not slow at a lower memory clock, a memory-bound
one's does. The throughput policy has what the battery policy lacks, each frame's measured
busy time (``gov.tick(units, busy_s)``), so its knob reads the time itself. It walks down
the memory clocks from the default to the one it may hold (the profile's pair's where the
profile keeps one, else the table's next clock below the default), one table step per test:

- at the memory clock held (the *level*: the default at the start), the frames' time per
  unit is remembered per core clock (the last ``REF_FRAMES`` at each);
- once the frames have been busy ``FIRST_TEST_S`` seconds there (busy seconds: the frames'
  own, as reported) and the core clock held has a fresh reference, the next memory clock
  down is tried;
- each frame there is judged as it is reported (:meth:`FrameMemoryKnob.frame`, from
  ``Governor.tick``, not at the next control period): a frame that ran late, or took more
  than ``FAIL_RISE`` over its core clock's reference, puts the level's memory clock back at
  once (the throughput controller does not learn that frame's time: :attr:`.Tick.mem_slowed`);
  after ``TEST_FRAMES`` frames at the held core clock their mean time per unit must be
  within noise of the reference (``NOISE_SIGMAS`` standard errors of both means, plus
  ``NOISE_FLOOR``) for the step to become the level, and the next step is tried as soon as
  its reference is taken;
- a step that failed is not tried again for ``RETEST_S[0]`` busy seconds, doubling with
  each failure to ``RETEST_S[1]``: a memory-bound load pays one slowed frame per test, at the
  first step down (the least slowdown), and a test is rare;
- a late frame fails a test, and below the default brings the default back at once, where
  it is also slower than the level's frames at its core clock (beyond ``LATE_SIGMAS`` of
  their spread; or none are known): a late frame as fast as those ran late at its core
  clock as it would have at the level (the throughput controller's dither lets a few run
  late by design), and the throughput controller answers it with the core clock. A frame
  slower by ``FAIL_RISE`` than the level's reference at its core clock (the load changed)
  brings the default back at once, late or not, and every
  ``RECHECK_S`` busy seconds the default comes back for the walk to be made afresh.

The deadline a frame must meet is the throughput controller's
(:attr:`.MemoryHints.unit_deadline_s`, one period of the rate per unit); the core clock
stays the controller's to choose. Every memory-clock change goes through
``Device.lock_mem_clock`` (journaled in the governor's layer, restored with it), as the
other knob's.
"""

from __future__ import annotations

import collections
import math
from typing import TYPE_CHECKING, Callable, Deque, Dict, List, Optional, Tuple

from governor.errors import GovernorError
from governor.runtime.mem_knob import MemoryKnob, settable_mem_clocks

if TYPE_CHECKING:
    from governor.devices.base import Device
    from governor.runtime.controller_base import Controller, Observation, Tick

__all__ = ["FrameMemoryKnob", "frame_knob", "lower_mem_mhz"]

FIRST_TEST_S = 2.0  # busy seconds at the default memory clock before a test
RETEST_S = (30.0, 240.0)  # after a failed test: the first wait, and the longest (doubling)
RECHECK_S = 10.0  # busy seconds below the default before the walk is made afresh
REF_FRAMES = 30  # frames remembered per core clock at the default memory clock
MIN_REF = 6  # frames a reference needs
REF_AGE_S = 3.0  # the oldest reference frame a test compares with (s)
TEST_FRAMES = 12  # frames at the lower memory clock before its verdict
FAIL_RISE = 0.25  # one frame this much slower than its reference: memory-bound, at once
NOISE_SIGMAS = 2.0  # the test's mean may exceed the reference by this many standard errors
NOISE_FLOOR = 0.005  # and by this share (the reference's own mean is estimated)
LATE_SIGMAS = 3.0  # a late frame is the memory clock's beyond this many frame spreads


def lower_mem_mhz(
    table_mhz: Tuple[float, ...], default_mhz: float, pair_mhz: Optional[float]
) -> float:
    """The memory clock the throughput knob tries: the pair's where the profile keeps one (the
    default where the pair's is not below it: its calibration found no gain), else the
    table's next clock below the default (the default itself where none is)."""
    if pair_mhz is not None:
        return min(float(pair_mhz), default_mhz)
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
        self.level = default_mhz  # the memory clock held between tests
        # per core clock: the last frames' time per unit at the level, and when the latest came
        self.ref_frames: Dict[float, Deque[float]] = {}
        self.ref_t: Dict[float, float] = {}
        # a test's frames: time per unit over the level's mean at their core clock, that
        # reference's relative variance and its number of frames
        self.test_frames: List[Tuple[float, float, int]] = []
        self.skipped = 0  # a test's frames at a core clock without a reference
        self.test_mhz: Optional[float] = None  # the core clock a test started at
        self.busy_s = 0.0  # the frames' busy seconds since the start
        self.blocked: Dict[float, Tuple[float, float]] = {}  # step: (until busy_s, wait)
        self.tests = self.failed = 0
        self.slowed = False  # the last verdict found the frame slowed by the memory clock

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
            self.apply(self._periodic(obs.applied_mhz, obs.t_s))
        except GovernorError as err:
            note(f"the memory clock could not be set ({err}): the core clock alone from now")
            self.off = True
        return self.mem_mhz

    def _periodic(self, core_mhz: float, now_s: float) -> float:
        if self.test_mhz is not None:
            return self.mem_mhz
        if self.level < self.default_mhz and self.default_s >= RECHECK_S - 1e-9:
            return self._reset(MIN_REF / 30.0)  # the walk made afresh from the default
        below = [m for m in self.table_mhz if self.low_mhz <= m < self.level]
        if not below or self.default_s < self.wait_s - 1e-9:
            return self.level
        step = below[-1]
        if self.busy_s < self.blocked.get(step, (0.0, 0.0))[0]:
            return self.level
        ref = self.ref_frames.get(core_mhz)
        if ref is None or len(ref) < MIN_REF or now_s - self.ref_t[core_mhz] > REF_AGE_S:
            return self.level
        self.test_mhz, self.test_frames, self.skipped = core_mhz, [], 0
        self.tests += 1
        return step

    def frame(self, controller: Controller, tick: Tick) -> bool:
        """One frame as the app reports it: remembered at the level, judged at a step below
        it (see the module), the level's memory clock set again at once where it fails.
        Returns whether the lower memory clock slowed it (the controller does not learn it:
        :attr:`.Tick.mem_slowed`)."""
        if self.off or tick.busy_s is None or tick.units <= 0:
            return False
        per_unit, f = tick.busy_s / tick.units, tick.applied_mhz
        self.busy_s += tick.busy_s
        self.default_s += tick.busy_s  # (busy seconds at the level since it was reached)
        deadline = controller.memory_hints().unit_deadline_s
        late = deadline is not None and per_unit > deadline
        target = self._verdict(per_unit, f, late) if self.test_mhz is not None else None
        if target is None:
            target = self._at_level(per_unit, f, late, tick.t_s)
        if target != self.mem_mhz:
            try:
                self.apply(target)
            except GovernorError:
                self.off = True  # said by the next step's refusal (the clock stays)
        return self.slowed

    def _at_level(self, per_unit: float, f: float, late: bool, t_s: float) -> float:
        """A frame at the level: remembered; below the default, a late or slowed frame (the
        load changed) brings the default back."""
        frames = self.ref_frames.setdefault(f, collections.deque(maxlen=REF_FRAMES))
        mean = sum(frames) / len(frames) if len(frames) >= MIN_REF else None
        self.slowed = False
        if self.level < self.default_mhz:
            self.slowed = mean is not None and per_unit > mean * (1.0 + FAIL_RISE)
            if self.slowed or (late and _slower(per_unit, frames) is not False):
                return self._reset(FIRST_TEST_S)
        frames.append(per_unit)
        self.ref_t[f] = t_s
        return self.level

    def _verdict(self, per_unit: float, f: float, late: bool) -> Optional[float]:
        """The memory clock after one frame of a test, judged against the level's frames at
        its own core clock (the controller may move the core clock, or dither, during a
        test); a frame at a core clock without a reference is only counted (a test that
        sees too few frames it can judge ends, neither failed nor passed)."""
        ref = self.ref_frames.get(f)
        self.slowed = False
        if ref is None or len(ref) < MIN_REF:
            if late:
                return self._fail()  # late, and no reference to clear the memory clock
            self.skipped += 1
            if self.skipped > 2 * TEST_FRAMES:
                self.test_mhz, self.default_s = None, 0.0
                return self.level
            return self.mem_mhz
        mean = sum(ref) / len(ref)
        self.slowed = per_unit > mean * (1.0 + FAIL_RISE)
        if self.slowed or (late and _slower(per_unit, ref)):
            return self._fail()
        sd = math.sqrt(sum((x - mean) ** 2 for x in ref) / (len(ref) - 1))
        self.test_frames.append((per_unit / mean, (sd / mean) ** 2, len(ref)))
        n = len(self.test_frames)
        if n < TEST_FRAMES:
            return self.mem_mhz
        ratio = sum(r for r, _, _ in self.test_frames) / n
        # the standard error of the mean ratio: the frames' own spread (their references'
        # relative variance, or the test frames' where that is larger) over n, and each
        # reference mean's error
        var = sum(v for _, v, _ in self.test_frames) / n
        var = max(var, sum((r - ratio) ** 2 for r, _, _ in self.test_frames) / (n - 1))
        ref_var = sum(v / k for _, v, k in self.test_frames) / n
        if ratio > 1.0 + NOISE_FLOOR + NOISE_SIGMAS * math.sqrt(var / n + ref_var):
            return self._fail()
        self.level, self.test_mhz = self.mem_mhz, None  # the step holds: the new level
        self.ref_frames.clear()  # taken afresh at the new level before the next step
        self.ref_t.clear()
        self.default_s, self.wait_s = 0.0, 0.0
        return self.level

    def _fail(self) -> float:
        """The test's step failed: the level back, the step not tried for a while."""
        self.failed += 1
        step = self.mem_mhz
        wait = self.blocked.get(step, (0.0, RETEST_S[0] / 2.0))[1]
        wait = min(RETEST_S[1], 2.0 * wait)
        self.blocked[step] = (self.busy_s + wait, wait)
        self.test_mhz = None
        self.default_s = 0.0
        return self.level

    def _reset(self, wait_s: float) -> float:
        """The default memory clock, its references taken afresh, the walk due after
        ``wait_s`` busy seconds there."""
        self.level, self.test_mhz = self.default_mhz, None
        self.default_s, self.wait_s = 0.0, wait_s
        self.ref_frames.clear()
        self.ref_t.clear()
        return self.default_mhz


def _slower(per_unit: float, frames: Optional[Deque[float]]) -> Optional[bool]:
    """Whether one frame's time per unit is beyond the noise of ``frames`` (their mean plus
    ``LATE_SIGMAS`` of their spread and ``NOISE_FLOOR``); None where fewer than ``MIN_REF``
    frames are known. A late frame that is not slower ran late at its core clock as it would
    have at the level's memory clock: the core clock's to answer, not the memory clock's."""
    if frames is None or len(frames) < MIN_REF:
        return None
    mean = sum(frames) / len(frames)
    sd = math.sqrt(sum((x - mean) ** 2 for x in frames) / (len(frames) - 1))
    return per_unit > mean * (1.0 + NOISE_FLOOR) + LATE_SIGMAS * sd
