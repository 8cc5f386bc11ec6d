"""A policy on a simulated board under a workload trace, in virtual time (``governor simulate``).

Traces (``TRACES``):

- ``steady``: the board's compute-bound workload all the time;
- ``bursty``: compute bursts of 2-8 s separated by 1-4 s idle (seeded);
- ``step``: memory-bound load, a step to compute-bound for the middle third, back again;
- ``memory``: the memory-bound load all the time;
- ``memory-compute``: the memory-bound load for the first third, then compute-bound to the
  end (``step`` and these two look the same to a policy until a third of the mission has
  run, and ``step`` and ``memory-compute`` until two thirds have);
- a phase list, ``load:weight,load:weight,...`` (loads ``compute``, ``memory`` and
  ``idle``): the loads in that order, each for its weight's share of the run
  (``compute:1,memory:1``: compute-bound for the first half, memory-bound for the second;
  the patterns of a job the named traces do not cover);
- ``perception-30hz``: a camera frame every 1/30 s; each needs the work of 45 % of a frame
  period at the top clock (±5 % jitter, seeded); frames queue while the GPU is busy and a
  frame that finishes after the next one arrives is a missed deadline. The app reports each
  frame with ``gov.tick(1, busy_s=...)`` and asks ``gov.admit()`` before taking one (a
  frame refused is skipped: ``frames_skipped``).

Figures are the simulator's truth, not the governor's readings: power is that of the figure
the device reports as ``power_w`` (its scope is in ``scope``) — the one a cap applies to.
``time_above_cap_s`` counts control periods whose power averaged over the cap's window (1 s,
as power-limit firmware enforces it) exceeds the cap; ``time_above_cap_instant_s`` counts
periods whose own mean power does (dithering between two clocks puts half of them there).
"""

from __future__ import annotations

import collections
import math
import random
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Deque,
    Dict,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
    cast,
)

from governor.errors import InvalidRequestError
from governor.runtime import policies as _policies
from governor.runtime.floor_controller import FloorState
from governor.runtime.governor import Governor
from governor.runtime.ppw_local import SearchState
from governor.runtime.status import GovernorState, find_record

if TYPE_CHECKING:
    from governor.devices.sim.device import SimDevice
    from governor.timebase import Clock

__all__ = ["TRACES", "phase_list", "simulate", "trace_segments"]

TRACES = ("steady", "bursty", "step", "memory", "memory-compute", "perception-30hz")
FRAME_RATE_HZ = 30.0
FRAME_LOAD = 0.45  # share of a frame period one frame needs at the top clock
FRAME_WORKLOAD = "compute"  # the load a frame runs (the board's; "memory": memory-bound)


PHASE_LOADS = {"compute": "compute", "memory": "memory", "idle": None}
MAX_PHASES = 1000
# the named load traces but ``bursty``, as phase lists
NAMED_PHASES = {
    "steady": "compute:1",
    "step": "memory:1,compute:1,memory:1",
    "memory": "memory:1",
    "memory-compute": "memory:1,compute:2",
}


def phase_list(trace: str) -> List[Tuple[Optional[str], float]]:
    """``[(workload or None, weight), ...]`` for a phase-list trace (``load:weight,...``;
    see the module's docstring): each phase runs for its weight's share of the run.

    Raises:
        InvalidRequestError: not a phase list of known loads and positive finite weights.
    """
    parts = trace.split(",")
    if len(parts) > MAX_PHASES:
        raise InvalidRequestError(f"a phase-list trace has at most {MAX_PHASES} phases")
    phases: List[Tuple[Optional[str], float]] = []
    for part in parts:
        load, sep, weight = part.partition(":")
        load = load.strip()
        if not sep or load not in PHASE_LOADS:
            raise InvalidRequestError(
                f"bad phase {part.strip()!r} in trace {trace!r}: write load:weight with load "
                f"one of {', '.join(PHASE_LOADS)} (e.g. compute:1,memory:2)"
            )
        try:
            w = float(weight)
        except ValueError:
            w = math.nan
        if not (0.0 < w < math.inf):
            raise InvalidRequestError(
                f"bad weight {weight!r} in trace {trace!r}: a finite number > 0"
            )
        phases.append((PHASE_LOADS[load], w))
    if not sum(w for _, w in phases) < math.inf:
        raise InvalidRequestError(f"the weights of trace {trace!r} add up past a float's range")
    return phases


def trace_segments(
    trace: str, duration_s: float, seed: int = 0
) -> List[Tuple[float, Optional[str]]]:
    """``[(start_s, workload or None), ...]`` for the load traces (not perception)."""
    if trace == "bursty":
        rng = random.Random(seed * 104729 + 17)
        out: List[Tuple[float, Optional[str]]] = []
        t = 0.0
        while t < duration_s:
            out.append((t, "compute"))
            t += rng.uniform(2.0, 8.0)
            if t >= duration_s:
                break
            out.append((t, None))
            t += rng.uniform(1.0, 4.0)
        return out
    spec = NAMED_PHASES.get(trace, trace if ":" in trace else None)
    if spec is None:
        raise InvalidRequestError(
            f"unknown trace {trace!r}; choose one of {', '.join(TRACES)} or a phase list "
            "(load:weight,...)"
        )
    phases = phase_list(spec)
    total = sum(w for _, w in phases)
    out = []
    done = 0.0  # the weights before this phase: it starts at duration · done / total
    for load, weight in phases:
        out.append((duration_s * done / total, load))
        done += weight
    return out


class _Recorder:
    """Per-period truth: power of the reported figure, cap windows, demand."""

    def __init__(
        self,
        dev: SimDevice,
        cap_w: Optional[float],
        window_s: float,
        budget_j: Optional[float],
        board_scope: bool = False,
    ) -> None:
        self.dev = dev
        board = dev.board
        sample = dev.sample()
        names = [r.name for r in sample.rails if r.power_w == sample.power_w]
        self.rail = names[0] if names else None
        self.scope = sample.power_scope
        self.board = board
        self.cap_w = cap_w
        self.window_s = window_s
        self.budget_j = budget_j
        self.window: Deque[Tuple[float, float]] = collections.deque()
        self.e_gpu_last = dev.true_energy_j()
        self.t_last = dev.clock.now_s()
        self.t0 = self.t_last
        self.board_scope = board_scope
        self.energy_j = 0.0  # on the recorded scope: the device's figure, or the board
        self.figure_energy_j = 0.0
        self.board_energy_j = 0.0
        self.gpu_energy_j = 0.0
        self.max_power_w = 0.0
        self.above_s = 0.0
        self.above_instant_s = 0.0
        self.demand_s = 0.0
        self.demand_energy_j = 0.0
        self.clock_s = 0.0
        self.mem_clock_s = 0.0  # the memory clock's time integral (MHz·s)
        self.lasted_s: Optional[float] = None
        self.demand = False

    def figure_w(self, gpu_w: float) -> float:
        if self.rail is None:
            return gpu_w
        return self.board.rail_powers_w(gpu_w)[self.rail]

    def mark_demand(self) -> None:
        """Whether the load now would exceed the cap at the top clock (uncapped demand)."""
        dev = self.dev
        if self.cap_w is None or dev.workload is None:
            self.demand = False
            return
        top = dev.supported_clocks_mhz()[-1]
        gpu = self.board.gpu_power_w(
            top, dev.true_temperature_c(), dev.workload, dev.state().mem_clock_mhz
        )
        self.demand = self.figure_w(gpu) > self.cap_w

    def record(self, clock_mhz: float) -> None:
        dev = self.dev
        now = dev.clock.now_s()
        dt = now - self.t_last
        if dt <= 0:
            return
        mem = dev.true_mem_clock_mhz()  # the one the period ran at
        self.mem_clock_s += (mem or 0.0) * dt
        e_gpu = dev.true_energy_j()
        gpu_w = (e_gpu - self.e_gpu_last) / dt
        figure_w = self.figure_w(gpu_w)
        board_w = self.board.board_power_w(gpu_w)
        power = board_w if self.board_scope else figure_w
        self.e_gpu_last, self.t_last = e_gpu, now
        before = self.energy_j
        self.energy_j += power * dt
        self.figure_energy_j += figure_w * dt
        self.board_energy_j += board_w * dt
        self.gpu_energy_j += gpu_w * dt
        self.clock_s += clock_mhz * dt
        self.max_power_w = max(self.max_power_w, power)
        if self.budget_j is not None and self.lasted_s is None and self.energy_j > self.budget_j:
            self.lasted_s = (now - dt - self.t0) + (self.budget_j - before) / power * 1.0
        if self.cap_w is not None:
            self.window.append((dt, power))
            span = sum(d for d, _ in self.window)
            while span - self.window[0][0] >= self.window_s - 1e-9:
                span -= self.window.popleft()[0]
            mean = sum(d * p for d, p in self.window) / span
            if mean > self.cap_w * (1 + 1e-9):
                self.above_s += dt
            if power > self.cap_w * (1 + 1e-9):
                self.above_instant_s += dt
            if self.demand:
                self.demand_s += dt
                self.demand_energy_j += power * dt


def simulate(
    board: str,
    policy: Union[_policies.Policy, Mapping[str, Any]],
    trace: str = "steady",
    duration_s: float = 60.0,
    *,
    interval_s: float = 0.1,
    seed: int = 0,
    profile: Any = None,
    battery: Optional[Callable[[], float]] = None,
    noise: bool = True,
    scope: Optional[str] = None,
    admit: bool = True,
    mem_clock_mhz: Optional[float] = None,
) -> Dict[str, Any]:
    """Run ``policy`` on ``sim:<board>`` over ``trace`` for ``duration_s`` of virtual time.

    Returns the keys of ``governor simulate --json`` (see specs/cli-json.md) and more.
    ``scope`` is the figure ``energy_j``, ``mean_power_w`` (and a battery's ``budget_j``,
    ``energy_left_j``, ``lasted_s``) are given on: ``"board"`` (the board's input, the
    default for the battery policy, which meters its budget there) or ``"gpu"`` (the figure
    the device reports as ``power_w``, the default otherwise). ``board_energy_j`` and
    ``gpu_energy_j`` (the GPU domain alone) are always there. On the perception trace the
    app asks ``gov.admit()`` before each frame and skips the frames it refuses
    (``frames_skipped``; a budget that cannot pay for every frame); ``admit=False`` is an app
    that does not ask and runs them all.

    Raises:
        InvalidRequestError: bad trace, duration or policy; DeviceNotFoundError: no such board.
    """
    from governor.devices.registry import open_device

    pol = _policies.from_spec(policy)
    if trace != "perception-30hz":
        trace_segments(trace, 1.0)  # a bad trace is refused before the device opens
    if not (0 < float(duration_s) <= 7 * 86400):
        raise InvalidRequestError(f"duration_s must be within 0..604800 s, not {duration_s!r}")
    uri = f"sim:{board}?seed={int(seed)}" + ("" if noise else "&noise=0")
    dev = cast("SimDevice", open_device(uri))  # a sim: URI opens a simulated board
    if mem_clock_mhz is not None:
        dev.lock_mem_clock(mem_clock_mhz)
    meter = _Metering.of(pol, scope)
    gov = Governor(
        dev,
        pol,
        profile=profile,
        interval_s=interval_s,
        background=False,
        battery=battery,
        handle_signals=False,
    )
    run = _run(dev, gov, meter, trace, duration_s, seed, admit)
    return _results(board, pol, trace, meter, run)


class _Metering:
    """What a run records for ``pol``: the cap (W) and its window (s), the energy budget (J)
    and the scope its energy is given on (``"board"`` or ``"gpu"``)."""

    def __init__(
        self, cap_w: Optional[float], window_s: float, budget_j: Optional[float], scope: str
    ) -> None:
        self.cap_w = cap_w
        self.window_s = window_s
        self.budget_j = budget_j
        self.scope = scope

    @classmethod
    def of(cls, pol: _policies.Policy, scope: Optional[str]) -> _Metering:
        """Raises InvalidRequestError: ``scope`` is not one of ``policies.SCOPES``."""
        cap, window = pol.cap_limit if pol.cap_limit is not None else (None, 1.0)
        budget = pol.budget_j  # a battery's, or a throughput's floor's
        if scope is None:
            scope = pol.budget_scope or ("board" if budget is not None else "gpu")
        if scope not in _policies.SCOPES:
            raise InvalidRequestError(
                f"scope must be one of {', '.join(_policies.SCOPES)}, not {scope!r}"
            )
        return cls(cap, window, budget, str(scope))


class _Run:
    """What one simulated run leaves: the recorder's truth, the governor's state, its
    controller's records and report, the work done and the perception trace's frame
    counts."""

    def __init__(
        self,
        rec: _Recorder,
        state: GovernorState,
        records: Tuple[Any, ...],
        measured: Any,
        work: float,
        frames: Tuple[int, int, int],
    ) -> None:
        self.rec = rec
        self.state = state
        self.records = records
        self.measured = measured
        self.work = work
        self.frames, self.misses, self.skipped = frames


def _run(
    dev: SimDevice,
    gov: Governor,
    meter: _Metering,
    trace: str,
    duration_s: float,
    seed: int,
    admit: bool,
) -> _Run:
    """Drive ``gov`` on ``dev`` over ``trace``, recording the truth of every period."""
    frames = (0, 0, 0)
    with dev:
        rec = _Recorder(
            dev, meter.cap_w, meter.window_s, meter.budget_j, board_scope=meter.scope == "board"
        )
        with gov:
            if trace == "perception-30hz":
                frames = _run_frames(dev, gov, rec, duration_s, seed, admit)
            else:
                _run_segments(dev, gov, rec, trace_segments(trace, duration_s, seed), duration_s)
            state, records = gov.state(), gov.controller.records()
            measured = gov.report()
        work = dev.work_done()
        dev.stop_workload()
    return _Run(rec, state, records, measured, work, frames)


def _results(
    board: str, pol: _policies.Policy, trace: str, meter: _Metering, run: _Run
) -> Dict[str, Any]:
    """The keys of ``governor simulate --json`` from a finished run."""
    rec, state = run.rec, run.state
    floor = find_record(run.records, FloorState)
    search = find_record(run.records, SearchState)
    d = rec.t_last - rec.t0
    out: Dict[str, Any] = {
        "board": board,
        "policy": pol.name,
        "policy_spec": pol.to_spec(),
        "trace": trace,
        "scope": "board input" if meter.scope == "board" else rec.scope,
        "duration_s": d,
        "energy_j": rec.energy_j,
        "board_energy_j": rec.board_energy_j,
        "gpu_energy_j": rec.gpu_energy_j,
        "figure_energy_j": rec.figure_energy_j,
        "figure_scope": rec.scope,
        "mean_power_w": rec.energy_j / d if d > 0 else 0.0,
        "max_power_w": rec.max_power_w,
        "mean_clock_mhz": rec.clock_s / d if d > 0 else None,
        "mean_mem_clock_mhz": rec.mem_clock_s / d if d > 0 and rec.mem_clock_s else None,
        "time_above_cap_s": rec.above_s,
        "time_above_cap_instant_s": rec.above_instant_s,
        "work_done": run.work,
        "deadline_misses": run.misses,
        "frames": run.frames,
        "frames_skipped": run.skipped,
        "admitted_rate_hz": floor.admitted_rate_hz if floor is not None else None,
        "clock_changes": state.clock_changes,
        "safe_hold": state.safe_hold,
        "model": state.model,
        "online_ppw": search.online_ppw if search is not None else None,
        "rate_degraded_s": floor.rate_degraded_s if floor is not None else None,
        "notes": state.notes,
        "measured": run.measured,
    }
    cap, budget = meter.cap_w, meter.budget_j
    if cap is not None:
        out["cap_w"] = cap
        out["demand_s"] = rec.demand_s
        out["mean_power_while_demand_w"] = (
            rec.demand_energy_j / rec.demand_s if rec.demand_s > 0 else None
        )
    if budget is not None:
        out["budget_j"] = budget
        # the policies that meter a budget (a battery, a throughput's floor) have a mission
        out["target_s"] = pol.target_s
        out["lasted_s"] = rec.lasted_s if rec.lasted_s is not None else d
        out["energy_left_j"] = budget - rec.energy_j
    return out


def _run_segments(
    dev: SimDevice,
    gov: Governor,
    rec: _Recorder,
    segments: List[Tuple[float, Optional[str]]],
    duration_s: float,
) -> None:
    steps = int(round(duration_s / gov.interval_s))
    seg = 0
    current: Optional[str] = "unset"
    for k in range(steps):
        t = k * gov.interval_s
        while seg + 1 < len(segments) and segments[seg + 1][0] <= t + 1e-9:
            seg += 1
        wanted = segments[seg][1]
        if wanted != current:
            if wanted is None:
                dev.stop_workload()
            else:
                dev.run_workload(wanted)
            current = wanted
        rec.mark_demand()
        clock = gov.applied_clock_mhz or 0.0
        dev.clock.sleep(gov.interval_s)
        rec.record(clock)
        gov.step(advance_s=0)


class _ControlSteps:
    """The governor's control steps between frames: one every ``interval_s`` from
    ``first_s``, each recorded, run in order up to a time."""

    def __init__(self, gov: Governor, rec: _Recorder, clock: Clock, first_s: float) -> None:
        self.gov = gov
        self.rec = rec
        self.clock = clock
        self.next_s = first_s

    def until(self, t_end: float) -> None:
        """Run every step due by ``t_end``, sleeping the virtual clock up to each."""
        gov, clock = self.gov, self.clock
        while self.next_s <= t_end + 1e-12:
            wait = self.next_s - clock.now_s()
            if wait > 0:
                clock.sleep(wait)
            self.rec.record(gov.applied_clock_mhz or 0.0)
            gov.step(advance_s=0)
            self.next_s += gov.interval_s


def _run_frames(
    dev: SimDevice, gov: Governor, rec: _Recorder, duration_s: float, seed: int, admit: bool = True
) -> Tuple[int, int, int]:
    """(frames, missed, skipped): the camera's frames, those late or dropped as stale, and
    those the app skipped because ``gov.admit()`` said so (an app that does not ask,
    ``admit=False``, runs every frame it can)."""
    rng = random.Random(seed * 7919 + 3)
    workload = dev.board.workloads[FRAME_WORKLOAD]
    top = dev.supported_clocks_mhz()[-1]
    mem = dev.state().mem_clock_mhz  # the frame's work is sized at the memory clock at start
    start_mem = (mem, dev.true_mem_clock_mhz())
    period = 1.0 / FRAME_RATE_HZ
    units_per_frame = FRAME_LOAD * period / workload.time_per_unit_s(top, mem)
    clock = dev.clock
    t0 = clock.now_s()
    control_until = _ControlSteps(gov, rec, clock, t0 + gov.interval_s).until
    arrival = t0
    frames = misses = skipped = 0
    running = False
    while arrival < t0 + duration_s - 1e-9:
        now = clock.now_s()
        if now < arrival:  # idle until the frame arrives
            if running:
                dev.stop_workload()
                running = False
            control_until(arrival)
            if clock.now_s() < arrival:
                clock.sleep(arrival - clock.now_s())
        jitter = min(1.25, max(0.85, rng.gauss(1.0, 0.05)))
        if clock.now_s() >= arrival + period - 1e-9:  # a whole period stale: dropped, as a
            frames += 1  # real-time pipeline does, not queued (the run keeps its length)
            misses += 1
            arrival += period
            continue
        if admit and not gov.admit():  # the governor says the budget cannot take it
            frames += 1
            skipped += 1
            arrival += period
            continue
        f = gov.applied_clock_mhz or top
        # the memory clock the frame runs at (the throughput policy may move it)
        busy = (
            units_per_frame * jitter * workload.time_per_unit_s(f, _frame_mem_mhz(dev, start_mem))
        )
        if not running:
            dev.run_workload(FRAME_WORKLOAD)
            running = True
        clock.sleep(busy)
        done = clock.now_s()
        frames += 1
        if done > arrival + period + 1e-9:
            misses += 1
        gov.tick(1.0, busy_s=busy)
        arrival += period
        control_until(min(done, arrival))
    control_until(t0 + duration_s)
    if running:
        dev.stop_workload()
    return frames, misses, skipped


def _frame_mem_mhz(
    dev: SimDevice, start: Tuple[Optional[float], Optional[float]]
) -> Optional[float]:
    """The memory clock a frame's time is taken at: as at the start (``start``: the lock
    read then, and the clock the board ran) while the board runs the same memory clock, else
    the one it runs now (the throughput policy moved it)."""
    now = dev.true_mem_clock_mhz()
    return start[0] if now == start[1] else now
