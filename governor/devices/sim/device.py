"""The simulated device: a board from the catalog, integrated over virtual (or wall) time.

``sim:<board>`` opens one. Options go after ``?`` as ``key=value`` pairs joined by ``&``:

- ``seed=N``           sensor noise seed (default 0; runs are reproducible)
- ``realtime=1``       follow the wall clock (demos) instead of a virtual clock (tests)
- ``noise=0``          turn sensor noise off
- ``fail_rate=P``      each read fails with probability P (a TelemetryError)
- ``stuck_after_s=T``  power sensors freeze after T s of device time
- ``power_mode=NAME``  start in this power mode (Jetson boards; default: the fastest)
- ``mem_clock=MHZ``    start at this memory clock (boards with several)

Time moves only when someone sleeps on ``device.clock`` (virtual) or as the wall clock runs
(``realtime=1``); every read first integrates the physics up to now: temperature with its
time constant, power and the energy counter, work done by the running workload, and the
firmware's power-limit throttling.
"""

from __future__ import annotations

import bisect
import math
import random
import threading
from typing import Any, Dict, List, Optional, Tuple, Union
from urllib.parse import parse_qsl

from governor._version import __version__
from governor.devices.base import (
    Capabilities,
    DeviceState,
    Identity,
    PowerLimitRange,
    Rail,
    Sample,
    WorkloadDevice,
    frozen_record,
)
from governor.devices.sim.catalog import get_board
from governor.devices.sim.physics import BoardSpec, Workload
from governor.errors import InvalidRequestError, TelemetryError
from governor.timebase import Clock, VirtualClock, WallClock

__all__ = ["SimDevice", "open_sim"]

_FINE_STEP_S = 0.02  # integration step over the last seconds (sensor windows)
_COARSE_STEP_S = 0.5  # before that (thermal time constants are >= 10 s)
# How long an operating point (clock, power, rate) holds while nothing is changed. Only the
# temperature moves it, with a time constant >= 15 s on every board: in 0.1 s the die moves by
# < 0.7 % of its distance to steady state, which changes power by < 0.1 W (leakage S·λ <=
# 0.45 W/°C), below sensor noise. Settings and load changes re-evaluate at once.
_OP_REUSE_S = 0.1
_HISTORY_S = 2.5  # how much fine history the averaging sensors may need

_OPTIONS = {"seed", "realtime", "noise", "fail_rate", "stuck_after_s", "power_mode", "mem_clock"}


def parse_options(text: str) -> Dict[str, str]:
    # a second "?" joins options too: sim:BOARD?mem_clock=665.6 given to a caller that adds
    # its own "?seed=0" (runtime.simulate) is sim:BOARD?mem_clock=665.6&seed=0
    text = text.replace("?", "&")
    options = dict(parse_qsl(text, keep_blank_values=True, strict_parsing=False)) if text else {}
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise InvalidRequestError(
            f"unknown sim option(s) {', '.join(unknown)}; known: {', '.join(sorted(_OPTIONS))}"
        )
    return options


def _float_option(options: Dict[str, str], key: str, default: float, lo: float, hi: float) -> float:
    if key not in options:
        return default
    try:
        value = float(options[key])
    except ValueError:
        raise InvalidRequestError(f"sim option {key}={options[key]!r} is not a number") from None
    if not (lo <= value <= hi):
        raise InvalidRequestError(f"sim option {key}={value:g} is outside {lo:g}..{hi:g}")
    return value


class SimDevice(WorkloadDevice):
    """A simulated board (see module docstring). Also offers ``run_workload``/``stop_workload``
    and ``work_done``, which the calibration and runtime layers use as the device's load."""

    persistent_state = False  # lives in this process: journal in memory, no device lock

    def __init__(
        self,
        board: BoardSpec,
        *,
        uri: Optional[str] = None,
        clock: Optional[Clock] = None,
        seed: int = 0,
        noise: bool = True,
        fail_rate: float = 0.0,
        stuck_after_s: Optional[float] = None,
        power_mode: Optional[str] = None,
        mem_clock_mhz: Optional[float] = None,
    ) -> None:
        self.board = board
        uri = uri or f"sim:{board.name}"
        datacenter = board.kind == "datacenter"
        caps = Capabilities(
            power=True,
            energy_counter=board.energy_counter,
            rails=True,
            gpu_clock=True,
            mem_clock=bool(board.mem_clocks_mhz),
            temperature=True,
            utilisation=True,
            throttle_reasons=True,
            lock_gpu_clocks=True,
            lock_mem_clock=len(board.mem_clocks_mhz) > 1,
            power_limit=datacenter and board.power_limit_range_w is not None,
            power_mode=bool(board.power_modes),
        )
        identity = Identity(
            uri=uri,
            kind="sim",
            name=f"{board.display_name} (simulated)",
            model=board.name,
            serial=f"SIM-{board.name}-{seed}",
            uuid=f"SIM-{board.name}",
            driver_version=f"governor-sim {__version__}",
            l4t_version=None,
        )
        super().__init__(identity, caps, clock=clock or VirtualClock())
        self._rng_seed = int(seed)
        self._noise_table: List[float] = []
        self._noise = bool(noise) and board.noise_rel > 0
        self._fail_rate = float(fail_rate)
        self._fail_rng = random.Random(seed * 7919 + 1)
        self._stuck_after_s = stuck_after_s
        self._stuck_value: Optional[Tuple[float, Dict[str, float]]] = None
        # settings
        self._locked: Optional[Tuple[float, float]] = None
        self._mem_locked: Optional[float] = None
        if mem_clock_mhz is not None and mem_clock_mhz not in board.mem_clocks_mhz:
            known = ", ".join(f"{m:g}" for m in board.mem_clocks_mhz) or "none"
            raise InvalidRequestError(
                f"memory clock {mem_clock_mhz:g} MHz is not supported by {board.name} (supported: {known})"
            )
        self._mem_clock = (
            mem_clock_mhz if mem_clock_mhz is not None else board.default_mem_clock_mhz
        )
        self._power_limit_w = board.power_limit_w
        if power_mode is not None and power_mode not in board.power_modes:
            raise InvalidRequestError(
                f"unknown power mode {power_mode!r} for {board.name}; known: {', '.join(board.power_modes)}"
            )
        self._power_mode = power_mode or board.default_power_mode
        self._default_power_mode = self._power_mode
        # physical state
        self._workload: Optional[Workload] = None
        self._t_s = self.clock.now_s()
        self._t0_s = self._t_s
        idle_clock = board.clocks_mhz[0]
        self._temperature_c = board.steady_temperature_c(
            board.steady_gpu_power_w(idle_clock, None, self._mem_clock)
        )
        self._energy_j = 0.0
        self._work = 0.0
        self._clock_mhz = idle_clock
        self._throttled = False
        self._power_w = board.gpu_power_w(idle_clock, self._temperature_c, None, self._mem_clock)
        # recent integration steps, for averaging sensors: end times, powers, and the energy
        # integrated up to each end (so a window's mean is two look-ups, not a scan)
        self._hist_t: List[float] = []
        self._hist_p: List[float] = []
        self._hist_e: List[float] = []
        self._hist_dt: List[float] = []
        self._module_rails = frozenset(board.module_rails())
        self._clock_tables: Dict[Optional[str], List[float]] = {}  # power mode -> clocks
        self._sorted_clocks: Dict[Optional[str], Tuple[float, ...]] = {}  # the same, as a tuple
        self._rate = 0.0  # units of work per second at the present operating point
        # the work rates of the load _rates_load by (clock, memory clock) (_evaluate_point)
        self._rates: Dict[Tuple[float, Optional[float]], float] = {}
        self._rates_load: Optional[Workload] = None
        # per rail, what a reading needs (see _plan_rails), built at the first reading
        self._rail_plan: Optional[List[Tuple[str, float, float, str, Optional[float]]]] = None
        self._best_rail_index = 0  # the GPU figure: the narrowest rail with the GPU
        self._module_index: Optional[List[int]] = None  # rails summed to the board's input
        self._last_rails: List[Optional[Tuple[float, Rail]]] = []
        # per INA3221 rail, the readings made so far by their current (integer mA): a noisy
        # rail's current takes a few hundred values, each one Rail (immutable) built once
        self._rails_seen: List[Dict[float, Rail]] = []
        self._reasons = {
            (idle, throttled, setting): frozenset(
                name
                for name, on in (
                    ("idle", idle),
                    ("sw_power_cap", throttled),
                    ("clocks_setting", setting),
                )
                if on
            )
            for idle in (False, True)
            for throttled in (False, True)
            for setting in (False, True)
        }
        self._op_until_s = -math.inf  # until when _step may reuse the operating point
        self._io_lock = threading.RLock()  # a governor and an energy meter may read at once

    # -- the load (used by calibration and the runtime) ---------------------------------
    @property
    def workload(self) -> Optional[Workload]:
        return self._workload

    def workloads(self) -> Tuple[str, ...]:
        """Names of the board's workloads (``compute``, ``memory``, measured ones)."""
        return tuple(self.board.workloads)

    def run_workload(self, workload: Union[str, Workload]) -> Workload:
        """Start running ``workload`` (a name from ``workloads()`` or a Workload) until stopped."""
        if isinstance(workload, str):
            if workload not in self.board.workloads:
                raise InvalidRequestError(
                    f"unknown workload {workload!r} on {self.board.name}; known: {', '.join(self.board.workloads)}"
                )
            workload = self.board.workloads[workload]
        self._advance()
        self._workload = workload
        self._refresh_operating_point()
        return workload

    def stop_workload(self) -> None:
        """Go idle."""
        self._advance()
        self._workload = None
        self._refresh_operating_point()

    def work_done(self) -> float:
        """Units of work completed since the device was opened (fractional)."""
        self._advance()
        return self._work

    def true_energy_j(self) -> float:
        """The exact energy the GPU domain used since opening (J), for tests and benches."""
        self._advance()
        return self._energy_j

    def true_mem_clock_mhz(self) -> Optional[float]:
        """The memory clock the board runs at now (MHz; None: a board without one), for
        tests and benches."""
        return self._mem_clock

    def true_temperature_c(self) -> float:
        """The exact die temperature (°C) the sensors round, for tests and benches."""
        self._advance()
        return self._temperature_c

    # -- description ----------------------------------------------------------------------
    def _supported_clocks_mhz(self) -> List[float]:
        cache = self._clock_tables
        table = cache.get(self._power_mode)
        if table is None:
            cap = self.board.max_clock_mhz(self._power_mode)
            table = cache[self._power_mode] = [c for c in self.board.clocks_mhz if c <= cap + 1e-9]
        return table

    def supported_clocks_mhz(self) -> Tuple[float, ...]:
        """GPU clocks the device can be locked to, ascending (MHz): the base class's sorted
        tuple, kept per power mode (every clock lock snaps to it)."""
        cache = self._sorted_clocks
        table = cache.get(self._power_mode)
        if table is None:
            table = cache[self._power_mode] = tuple(sorted(self._supported_clocks_mhz()))
        return table

    def _supported_mem_clocks_mhz(self) -> Tuple[float, ...]:
        return self.board.mem_clocks_mhz

    def power_limit_range(self) -> Optional[PowerLimitRange]:
        if not self.capabilities.power_limit or self.board.power_limit_range_w is None:
            return None
        lo, hi = self.board.power_limit_range_w
        return PowerLimitRange(lo, hi, self.board.power_limit_w)

    def power_modes(self) -> Tuple[str, ...]:
        return tuple(self.board.power_modes)

    # -- physics over time ------------------------------------------------------------------
    def _target_point(self) -> Tuple[float, bool, float]:
        """The clock the firmware runs, whether it throttled, and the GPU power there."""
        board = self.board
        workload = self._workload
        if workload is None:
            clock = self._locked[0] if self._locked else board.clocks_mhz[0]
            power = board.gpu_power_w(clock, self._temperature_c, None, self._mem_clock)
            return clock, False, power
        top = board.max_clock_mhz(self._power_mode)
        wanted = min(self._locked[1], top) if self._locked else top
        return board.throttled_point(
            wanted,
            self._temperature_c,
            workload,
            self._power_limit_w,
            self._mem_clock,
            hint_mhz=self._clock_mhz if self._throttled else None,
        )

    def _refresh_operating_point(self) -> None:
        """Clock and power change at once when the load or a setting changes."""
        self._evaluate_point()

    def _evaluate_point(self) -> None:
        """The operating point (clock, power, work rate) at the present temperature; it holds
        for ``_OP_REUSE_S`` unless a setting or the load changes first."""
        clock, throttled, self._power_w = self._target_point()
        workload = self._workload
        if workload is None:
            self._rate = 0.0
        else:  # the rate at a clock does not move with temperature: kept per clock (a
            # controller dithers between two) for the load running, at its memory clock
            rates = self._rates
            if self._rates_load is not workload or len(rates) > 256:
                rates.clear()
                self._rates_load = workload
            key = (clock, self._mem_clock)
            rate = rates.get(key)
            if rate is None:
                rate = rates[key] = 1.0 / workload.time_per_unit_s(clock, self._mem_clock)
            self._rate = rate
        self._clock_mhz, self._throttled = clock, throttled
        self._op_until_s = self._t_s + _OP_REUSE_S

    def _step(self, dt: float, until_s: Optional[float] = None) -> None:
        """Integrate ``dt`` seconds; with ``until_s`` (fine steps up to that time), every
        fine step that would start while the operating point holds is taken at once: power
        and the thermal target are constant over them, so one step of their total length
        gives the same energy, work and temperature (the exponential composes), and the
        sensors' windows see the same power over the same times."""
        board = self.board
        if self._t_s >= self._op_until_s:
            self._evaluate_point()
        power, rate = self._power_w, self._rate
        if until_s is not None and self._op_until_s > self._t_s + dt:
            fine = math.ceil((self._op_until_s - self._t_s) / _FINE_STEP_S - 1e-9)
            dt = min(fine * _FINE_STEP_S, until_s - self._t_s)
        self._energy_j += power * dt
        self._work += dt * rate
        target = board.steady_temperature_c(power)
        self._temperature_c += (target - self._temperature_c) * (
            1.0 - math.exp(-dt / board.thermal_tau_s)
        )
        self._t_s += dt
        self._hist_t.append(self._t_s)
        self._hist_p.append(power)
        self._hist_e.append(self._energy_j)
        self._hist_dt.append(dt)

    def _advance(self) -> None:
        with self._io_lock:
            self._advance_locked()

    def _advance_locked(self) -> None:
        now = self.clock.now_s()
        remaining = now - self._t_s
        while remaining > 1e-12:
            if remaining > _HISTORY_S:
                self._step(_COARSE_STEP_S)
            else:
                self._step(min(_FINE_STEP_S, remaining), until_s=now)
            remaining = now - self._t_s
        old = bisect.bisect_left(self._hist_t, self._t_s - _HISTORY_S)
        if old > 256:  # drop stale steps now and then (amortised)
            del self._hist_t[:old], self._hist_p[:old], self._hist_e[:old], self._hist_dt[:old]

    def _energy_at_j(self, t_s: float) -> float:
        """Energy integrated up to time ``t_s`` (within the recent history)."""
        i = bisect.bisect_left(self._hist_t, t_s)
        if i >= len(self._hist_t):
            return self._hist_e[-1]
        return self._hist_e[i] - self._hist_p[i] * (self._hist_t[i] - t_s)

    def _average_power_w(self, t_end: float, window_s: float) -> float:
        if not self._hist_t:
            return self._power_w
        if window_s <= 0:  # the step under way at t_end
            i = bisect.bisect_left(self._hist_t, t_end - 1e-12)
            return self._hist_p[min(i, len(self._hist_p) - 1)]
        t_start = max(t_end - window_s, self._hist_t[0] - self._hist_dt[0])
        t_stop = min(t_end, self._hist_t[-1])
        if t_stop <= t_start:
            return self._power_w
        return (self._energy_at_j(t_stop) - self._energy_at_j(t_start)) / (t_stop - t_start)

    def _noisy(self, value: float, key: int) -> float:
        if not self._noise:
            return value
        # one Gaussian draw per sensor refresh, fixed by (seed, refresh): a table drawn once
        # per device and indexed by a hash, instead of seeding a generator on every read
        table = self._noise_table
        if not table:
            rng = random.Random(self._rng_seed)
            table.extend(rng.gauss(0.0, self.board.noise_rel) for _ in range(4099))
        return value * (1.0 + table[hash((self._rng_seed, key)) % 4099])

    # -- telemetry ----------------------------------------------------------------------------
    def _read_sample(self) -> Sample:
        with self._io_lock:
            return self._read_sample_locked()

    def _read_sample_locked(self) -> Sample:
        self._advance_locked()  # (the caller holds the lock)
        board = self.board
        if self._fail_rate and self._fail_rng.random() < self._fail_rate:
            raise TelemetryError(f"{self.uri}: simulated sensor read failure")
        now = self._t_s
        # sensors refresh at their own rate; readings within one period are identical
        period = 1.0 / board.refresh_hz
        tick = math.floor((now - self._t0_s) / period + 1e-9)
        t_refresh = self._t0_s + tick * period
        if board.sensor == "nvml":
            gpu_w = self._noisy(self._average_power_w(t_refresh, board.power_average_s), tick)
        else:
            gpu_w = self._noisy(self._average_power_w(t_refresh, 0.0), tick)
        plan = self._rail_plan
        if plan is None:
            plan = self._rail_plan = self._plan_rails()
        if self._stuck_after_s is not None and now - self._t0_s >= self._stuck_after_s:
            if self._stuck_value is None:
                self._stuck_value = (gpu_w, board.rail_powers_w(gpu_w))
            gpu_w, rails_w = self._stuck_value
            powers = [rails_w[p[0]] for p in plan]
        else:  # board.rail_powers_w's sums, rail by rail
            powers = [fixed + share * gpu_w for _, fixed, share, _, _ in plan]
        rails = self._rails(plan, powers)
        best = rails[self._best_rail_index] if rails else None  # (set by _plan_rails)
        board_w: Optional[float] = None
        if board.kind == "datacenter":  # the card is the board (NVML's power)
            board_w = best.power_w if best else None
        elif self._module_index is not None:  # AGX: the rails through the regulators
            board_w = (
                sum([rails[i].power_w for i in self._module_index]) / board.regulator_efficiency
            )
        reasons = self._reasons[
            (
                self._workload is None,
                self._throttled,
                bool(self._locked) and self._workload is not None,
            )
        ]
        temperature = (
            round(self._temperature_c)
            if board.sensor == "nvml"
            else round(self._temperature_c * 2) / 2
        )
        return frozen_record(
            Sample,
            {
                "t_s": now,
                "power_w": best.power_w if best else None,
                "power_scope": best.scope if best else None,
                "rails": rails,
                "energy_j": math.floor(self._energy_j * 1000.0) / 1000.0
                if board.energy_counter
                else None,
                "gpu_clock_mhz": self._clock_mhz,
                "mem_clock_mhz": self._mem_clock,
                "temperature_c": float(temperature),
                "utilisation_pct": 100.0 if self._workload is not None else 0.0,
                "throttle_reasons": reasons,
                "board_power_w": board_w,
            },
        )

    def _plan_rails(self) -> List[Tuple[str, float, float, str, Optional[float]]]:
        """Per rail of the board (they do not change): its name, its power as ``fixed +
        share·P_gpu`` (:meth:`BoardSpec.rail_powers_w`), its scope, and the voltage an
        INA3221 reports (integer mV; None on other sensors). Also sets which rail is the
        GPU figure and which rails sum to the board's input on a board with no input rail."""
        board = self.board
        terms = {name: (fixed, share) for name, fixed, share in board._rail_terms()}
        plan = []
        for spec in board.rails:
            fixed, share = terms[spec.name]
            volts = round(spec.voltage_v * 1000.0) / 1000.0 if board.sensor == "ina3221" else None
            plan.append((spec.name, fixed, share, spec.scope, volts))
        with_gpu = [
            (len(spec.domains), i) for i, spec in enumerate(board.rails) if "gpu" in spec.domains
        ]
        self._best_rail_index = min(with_gpu)[1] if with_gpu else 0
        if board.kind != "datacenter" and not any(spec.input for spec in board.rails):
            module = self._module_rails
            self._module_index = [i for i, spec in enumerate(board.rails) if spec.name in module]
        self._last_rails = [None] * len(plan)
        self._rails_seen = [{} for _ in plan]
        return plan

    RAILS_SEEN = 4096  # readings kept per INA3221 rail (then forgotten, and kept anew)

    def _rails(
        self, plan: List[Tuple[str, float, float, str, Optional[float]]], powers: List[float]
    ) -> Tuple[Rail, ...]:
        """The rails' readings for these powers (W); a rail that reads what it read before
        is the same (immutable) Rail, not built again: an INA3221 rail's by its current
        (integer mA: with the rail's fixed name, scope and voltage, the whole reading),
        another's when it reads what it read last time."""
        last = self._last_rails
        seen_by_rail = self._rails_seen
        out = []
        for j, (name, _, _, scope, volts) in enumerate(plan):
            power = powers[j]
            if volts is not None:  # integer mV and mA, as hwmon reports them
                current = round(power / volts * 1000.0) / 1000.0
                seen = seen_by_rail[j]
                reading = seen.get(current)
                if reading is None:
                    if len(seen) >= self.RAILS_SEEN:
                        seen.clear()
                    reading = seen[current] = frozen_record(
                        Rail,
                        {
                            "name": name,
                            "power_w": volts * current,
                            "scope": scope,
                            "voltage_v": volts,
                            "current_a": current,
                        },
                    )
                out.append(reading)
                continue
            rail = last[j]
            if rail is None or rail[0] != power:
                value = frozen_record(
                    Rail,
                    {
                        "name": name,
                        "power_w": power,
                        "scope": scope,
                        "voltage_v": None,
                        "current_a": None,
                    },
                )
                rail = last[j] = (power, value)
            out.append(rail[1])
        return tuple(out)

    def _read_energy_counter_j(self) -> Optional[float]:
        self._advance()
        if self._fail_rate and self._fail_rng.random() < self._fail_rate:
            raise TelemetryError(f"{self.uri}: simulated sensor read failure")
        return math.floor(self._energy_j * 1000.0) / 1000.0

    # -- settings -------------------------------------------------------------------------------
    def _read_state(self) -> DeviceState:
        return DeviceState(
            gpu_clocks_mhz=self._locked,
            mem_clock_mhz=self._mem_locked,
            power_limit_w=self._power_limit_w if self.capabilities.power_limit else None,
            power_mode=self._power_mode,
        )

    def _write_gpu_clocks(self, min_mhz: float, max_mhz: float) -> None:
        self._advance()
        self._locked = (min_mhz, max_mhz)
        self._refresh_operating_point()

    def _reset_gpu_clocks(self) -> None:
        self._advance()
        self._locked = None
        self._refresh_operating_point()

    def _write_mem_clock(self, clock_mhz: Optional[float]) -> None:
        self._advance()
        self._mem_locked = clock_mhz
        self._mem_clock = clock_mhz if clock_mhz is not None else self.board.default_mem_clock_mhz
        self._refresh_operating_point()

    def _write_power_limit(self, power_w: float) -> None:
        self._advance()
        self._power_limit_w = power_w
        self._refresh_operating_point()

    def _write_power_mode(self, mode: str) -> None:
        self._advance()
        self._power_mode = mode
        if self._locked:  # nvpmodel caps the clock range
            top = self.board.max_clock_mhz(mode)
            self._locked = (min(self._locked[0], top), min(self._locked[1], top))
        self._refresh_operating_point()


def open_sim(spec: str, *, clock: Optional[Clock] = None) -> SimDevice:
    """Open ``sim:<board>[?options]`` (``spec`` is what follows ``sim:``)."""
    name, _, query = spec.partition("?")
    if not name:
        raise InvalidRequestError("a simulated device needs a board name, e.g. sim:agx-orin")
    return _open_board(get_board(name), f"sim:{spec}", query, clock)


def _open_board(board: Any, uri: str, query: str, clock: Optional[Clock]) -> SimDevice:
    """A simulated device of ``board`` with the options of a ``sim:``/``twin:`` URI's query."""
    options = parse_options(query)
    realtime = options.get("realtime", "0") not in ("", "0", "false", "no")
    if clock is None:
        clock = WallClock() if realtime else VirtualClock()
    mem = options.get("mem_clock")
    return SimDevice(
        board,
        uri=uri,
        clock=clock,
        seed=int(_float_option(options, "seed", 0, 0, 2**31)),
        noise=options.get("noise", "1") not in ("0", "false", "no"),
        fail_rate=_float_option(options, "fail_rate", 0.0, 0.0, 1.0),
        stuck_after_s=_float_option(options, "stuck_after_s", math.inf, 0.0, math.inf)
        if "stuck_after_s" in options
        else None,
        power_mode=options.get("power_mode"),
        mem_clock_mhz=_float_option(options, "mem_clock", 0.0, 1.0, 1e6) if mem else None,
    )


def open_twin(spec: str, *, clock: Optional[Clock] = None) -> SimDevice:
    """Open ``twin:PATH[?options]``: a simulated board fitted to the sweep in PATH (a replay
    CSV, optionally with a ``mem_clock_mhz`` column). Its built-in load is the sweep's workload;
    it answers at every clock of its table, measured or not. Options as for ``sim:``.

    Raises:
        InvalidRequestError: no path, unreadable or malformed file, too few clocks.
    """
    path, _, query = spec.partition("?")
    if not path:
        raise InvalidRequestError("a twin needs a sweep file, e.g. twin:sweep.csv")
    from governor.devices.sim.fit import read_twin_sweeps, twin_board

    board = twin_board(read_twin_sweeps(path), name="twin")
    return _open_board(board, f"twin:{spec}", query, clock)
