"""The physics of a simulated board: power, speed, temperature and throttling.

Pure functions of a :class:`BoardSpec` and a :class:`Workload`; no time, no state. The
simulated device (``device.py``) integrates them over (virtual) time.

Power of the GPU domain at clock ``f`` (MHz) and temperature ``T`` (°C)::

    P = S·(1 + λ·(T − T_amb))                 static power, leakage rising with temperature
      + P_mem(f_mem) + w.mem_w                memory: background at its clock, traffic extra
                                              (models.memory: the traffic follows 1/t on
                                              boards with ``mem_traffic_scales``)
      + α·f·V(f)²·(w.a_stall + w.a_busy·u(f))  dynamic CMOS power, C_eff·f·V²

    V(f) = 1 below the ridge clock, 1 + β·(f − f_ridge) above it (normalised voltage)
    u(f) = (c/f) / t(f)                       the share of time the SMs compute

Time per unit of work, a smooth roofline of a compute part and a memory part::

    t(f) = (t_mem^k + (c/f)^k)^(1/k)          c in s·MHz (Mcycles), k ≥ 1 how sharply they overlap

Both formulas are evaluated by :mod:`governor.models.formulas`, the one place they are
written (the fits and the runtime use the same functions).

A twin's workload (``fit.py``) may carry measured departures from these formulas at its main
memory clock, ``Workload.time_factor`` and ``power_factor``: per-clock factors (linear between
knots, :func:`factor_at`) that multiply t(f) and P. u(f) stays the formula's.

Temperature relaxes to ``T_amb + R·P`` with time constant ``τ``. When power would exceed the
limit, firmware picks the highest clock that fits.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Sequence, Tuple

from governor.models import formulas

__all__ = ["BoardSpec", "RailSpec", "VoltageCurve", "Workload", "factor_at"]


@dataclass(frozen=True)
class VoltageCurve:
    """Normalised core voltage: flat up to the ridge clock, rising linearly above it.

    ``floor_v`` (default 1) lowers the flat part: V(f) = max(floor_v, 1 + β·(f − f_ridge)),
    the same rising line with a lower floor. A GPU holds a higher minimum core voltage at a
    higher memory clock, so a twin's curve at a lower memory clock has ``floor_v`` < 1 (see
    ``fit.py``). Written through :func:`formulas.volts` as
    ``floor_v·volts(f, f_ridge − (1 − floor_v)/β, β/floor_v)``.
    """

    ridge_mhz: float
    beta_per_mhz: float
    floor_v: float = 1.0

    def __post_init__(self) -> None:
        if not (self.ridge_mhz >= 0 and self.beta_per_mhz >= 0 and 0 < self.floor_v <= 1):
            raise ValueError(f"invalid voltage curve {self}")

    def _scaled(self) -> Tuple[float, float, float]:
        """(scale, ridge_mhz, beta_per_mhz) with V(f) = scale·formulas.volts(f, ridge, beta)."""
        if self.floor_v == 1.0 or self.beta_per_mhz == 0:
            return 1.0, self.ridge_mhz, self.beta_per_mhz
        lowered = self.ridge_mhz - (1.0 - self.floor_v) / self.beta_per_mhz
        return self.floor_v, lowered, self.beta_per_mhz / self.floor_v

    def volts(self, clock_mhz: float) -> float:
        if self.floor_v == 1.0:
            return formulas.volts(clock_mhz, self.ridge_mhz, self.beta_per_mhz)
        scale, ridge, beta = self._scaled()
        return scale * formulas.volts(clock_mhz, ridge, beta)

    def dynamic_w(self, clock_mhz: float, alpha_w_per_mhz: float) -> float:
        """α·f·V(f)² (W), through :func:`formulas.cmos_power_w`."""
        if self.floor_v == 1.0:
            return formulas.cmos_power_w(
                clock_mhz, alpha_w_per_mhz, self.ridge_mhz, self.beta_per_mhz
            )
        scale, ridge, beta = self._scaled()
        return formulas.cmos_power_w(clock_mhz, alpha_w_per_mhz * scale * scale, ridge, beta)


@dataclass(frozen=True)
class Workload:
    """What runs on the GPU: how its time and power depend on the clocks.

    ``compute_mcycles`` (s·MHz per unit of work) is the compute part, ``mem_s`` the memory
    part at ``mem_clock_mhz`` (it scales inversely with the memory clock), ``overlap_k`` how
    sharply they overlap (1: add up; large: the slower one alone). ``a_stall`` and ``a_busy``
    scale the board's dynamic power while the SMs wait and while they compute; ``mem_w`` is
    the power of the workload's memory traffic. ``voltage`` overrides the board's curve where
    measurements of this workload demanded it (see the catalog's provenance).
    """

    name: str
    compute_mcycles: float
    mem_s: float = 0.0
    overlap_k: float = 1.0
    a_stall: float = 0.0
    a_busy: float = 1.0
    mem_w: float = 0.0
    mem_clock_mhz: Optional[float] = None
    voltage: Optional[VoltageCurve] = None
    description: str = ""
    source: str = ""
    #: the memory part measured at several memory clocks (MHz -> s); empty: ``mem_s`` scales
    #: as 1/f_mem from ``mem_clock_mhz``
    mem_s_at: Mapping[float, float] = field(default_factory=dict)
    #: ``overlap_k`` at other memory clocks (MHz -> k), where it differs from the main one's;
    #: a memory clock not listed uses ``overlap_k``
    overlap_k_at: Mapping[float, float] = field(default_factory=dict)
    #: a twin's measured departure from the smooth model at its main memory clock
    #: (``mem_clock_mhz``): (clock_mhz, factor) knots, linear in between and flat beyond the
    #: ends, multiplying the run time (``time_factor``) and the GPU power (``power_factor``).
    #: Empty (every catalog and tuning workload): the model alone. See ``fit.py``.
    time_factor: Tuple[Tuple[float, float], ...] = ()
    power_factor: Tuple[Tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        if not (
            self.compute_mcycles >= 0 and self.mem_s >= 0 and self.compute_mcycles + self.mem_s > 0
        ):
            raise ValueError(f"workload {self.name!r}: needs a positive compute or memory part")
        if not all(k >= 1 for k in (self.overlap_k, *self.overlap_k_at.values())):
            raise ValueError(f"workload {self.name!r}: overlap_k must be >= 1")
        if min(self.a_stall, self.a_busy, self.mem_w) < 0:
            raise ValueError(f"workload {self.name!r}: activities and mem_w must be >= 0")

    def mem_time_s(self, mem_clock_mhz: Optional[float]) -> float:
        """The memory part (s) at ``mem_clock_mhz``: a + b/f_mem through the two measured
        memory clocks nearest to it (a: latency that does not scale, b: bandwidth), or
        ``mem_s`` scaled as 1/f_mem when only one is known."""
        points = self.mem_s_at
        if len(points) < 2 or not mem_clock_mhz:
            return formulas.mem_time_s(self.mem_s, mem_clock_mhz, self.mem_clock_mhz)
        if mem_clock_mhz in points:
            return float(points[mem_clock_mhz])
        m1, m2 = sorted(points, key=lambda m: abs(m - mem_clock_mhz))[:2]
        t1, t2 = points[m1], points[m2]
        b = (t1 - t2) / (1.0 / m1 - 1.0 / m2)
        return max(0.0, t1 + b * (1.0 / mem_clock_mhz - 1.0 / m1))

    def time_per_unit_s(self, clock_mhz: float, mem_clock_mhz: Optional[float] = None) -> float:
        """Seconds per unit of work at GPU clock ``clock_mhz``."""
        smooth = self._model_time_s(clock_mhz, mem_clock_mhz)
        if self.time_factor and self.at_main_mem_clock(mem_clock_mhz):
            return smooth * factor_at(self.time_factor, clock_mhz)
        return smooth

    def _model_time_s(self, clock_mhz: float, mem_clock_mhz: Optional[float]) -> float:
        # remembered per (clock, memory clock): the simulator asks for the same few table
        # clocks on every operating point, twice each (time and busy share)
        cache = self.__dict__.get("_time_cache")  # not a field: eq/hash unchanged
        if cache is None:
            cache = self.__dict__["_time_cache"] = {}
        key = (clock_mhz, mem_clock_mhz)
        value = cache.get(key)
        if value is None:
            if len(cache) >= 4096:  # arbitrary clocks (fits, benches): stay bounded
                cache.clear()
            k = self.overlap_k_at.get(mem_clock_mhz, self.overlap_k) if mem_clock_mhz else None
            value = cache[key] = formulas.time_s(
                clock_mhz,
                self.mem_time_s(mem_clock_mhz),
                self.compute_mcycles,
                self.overlap_k if k is None else k,
            )
        return value

    def at_main_mem_clock(self, mem_clock_mhz: Optional[float]) -> bool:
        """Whether ``mem_clock_mhz`` is the one the measured factors belong to."""
        return mem_clock_mhz is None or self.mem_clock_mhz in (None, mem_clock_mhz)

    def busy_fraction(self, clock_mhz: float, mem_clock_mhz: Optional[float] = None) -> float:
        """Share of time the SMs compute, u = (c/f)/t(f), in [0, 1], from the smooth model's
        time (a twin's ``time_factor`` is not compute: its power fit used the model's u)."""
        return min(
            1.0, (self.compute_mcycles / clock_mhz) / self._model_time_s(clock_mhz, mem_clock_mhz)
        )


def factor_at(knots: Tuple[Tuple[float, float], ...], clock_mhz: float) -> float:
    """The factor at ``clock_mhz`` from (clock_mhz, factor) knots (ascending clocks): linear
    between knots, the end value beyond them."""
    i = bisect.bisect_left(knots, (clock_mhz, -math.inf))
    if i <= 0:
        return knots[0][1]
    if i >= len(knots):
        return knots[-1][1]
    (f0, v0), (f1, v1) = knots[i - 1], knots[i]
    return v0 + (v1 - v0) * (clock_mhz - f0) / (f1 - f0)


@dataclass(frozen=True)
class RailSpec:
    """A power rail: its sensor name, what it measures, and which power domains feed it.

    Domains are ``gpu`` (the modelled GPU power) and the board's constant domains
    (``cpu``, ``soc``, ``cv``, ``ddr``, ``sys``...). ``input`` rails see every domain
    divided by the regulators' efficiency.
    """

    name: str
    scope: str
    domains: Tuple[str, ...]
    voltage_v: float = 5.0
    input: bool = False


@dataclass(frozen=True)
class BoardSpec:
    """Everything the simulator needs to know about a board (loaded from the catalog)."""

    name: str
    display_name: str
    kind: str  # "jetson" or "datacenter"
    clocks_mhz: Tuple[float, ...]
    static_w: float
    dyn_w_per_mhz: float
    voltage: VoltageCurve
    power_limit_w: float
    power_limit_range_w: Optional[Tuple[float, float]] = None
    mem_clocks_mhz: Tuple[float, ...] = ()
    default_mem_clock_mhz: Optional[float] = None
    mem_static_w: Mapping[float, float] = field(default_factory=dict)
    #: the voltage floor (``VoltageCurve.floor_v``) at other memory clocks (MHz -> floor);
    #: empty: one voltage curve at every memory clock (every catalog board)
    mem_floor_v: Mapping[float, float] = field(default_factory=dict)
    #: the workload's memory traffic power (``Workload.mem_w``, measured at the default memory
    #: clock) follows the rate it moves bytes at other memory clocks (constant energy per
    #: byte, :mod:`governor.models.memory`); False: constant (the fitted twins, as measured)
    mem_traffic_scales: bool = False
    idle_activity: float = 0.02
    leakage_per_c: float = 0.01
    ambient_c: float = 30.0
    thermal_r_c_per_w: float = 0.15
    thermal_tau_s: float = 20.0
    domains_w: Mapping[str, float] = field(default_factory=dict)
    regulator_efficiency: float = 0.9
    rails: Tuple[RailSpec, ...] = ()
    sensor: str = "nvml"  # "nvml" (averaged, optional energy counter) or "ina3221"
    power_average_s: float = 0.0  # NVML power averaging window (1 s on Ampere+ but GA100)
    refresh_hz: float = 10.0
    noise_rel: float = 0.005
    energy_counter: bool = False
    power_modes: Mapping[str, float] = field(default_factory=dict)  # name -> GPU clock cap
    default_power_mode: Optional[str] = None
    workloads: Mapping[str, Workload] = field(default_factory=dict)
    facts: Mapping[str, object] = field(default_factory=dict)  # SMs, CC, L2... for tuning
    inferred: Tuple[str, ...] = ()  # which values are inferred, not read from a capture
    source: str = ""

    def __post_init__(self) -> None:
        if not self.clocks_mhz or list(self.clocks_mhz) != sorted(set(self.clocks_mhz)):
            raise ValueError(f"board {self.name}: clocks must be ascending and distinct")
        if self.static_w < 0 or self.dyn_w_per_mhz <= 0 or self.power_limit_w <= 0:
            raise ValueError(f"board {self.name}: invalid power parameters")
        if self.thermal_r_c_per_w * self.leakage_per_c * self.static_w >= 1:
            raise ValueError(f"board {self.name}: thermal runaway (S·λ·R >= 1)")
        if "compute" not in self.workloads or "memory" not in self.workloads:
            raise ValueError(f"board {self.name}: needs 'compute' and 'memory' workloads")

    # -- power ---------------------------------------------------------------------
    def mem_background_w(self, mem_clock_mhz: Optional[float]) -> float:
        if not self.mem_static_w:
            return 0.0
        if mem_clock_mhz is not None and mem_clock_mhz in self.mem_static_w:
            return float(self.mem_static_w[mem_clock_mhz])
        known = sorted(self.mem_static_w)
        if mem_clock_mhz is None or len(known) < 2:  # nearest known memory clock
            key = min(known, key=lambda m: abs(m - (mem_clock_mhz or 0.0)))
            return float(self.mem_static_w[key])
        # memory power is linear in its clock between (and beyond) the two nearest known
        m1, m2 = sorted(known, key=lambda m: abs(m - mem_clock_mhz))[:2]
        p1, p2 = self.mem_static_w[m1], self.mem_static_w[m2]
        return float(p1 + (p2 - p1) * (mem_clock_mhz - m1) / (m2 - m1))

    def gpu_power_w(
        self,
        clock_mhz: float,
        temperature_c: float,
        workload: Optional[Workload],
        mem_clock_mhz: Optional[float] = None,
    ) -> float:
        """Instantaneous power of the GPU domain (W); ``workload`` None means idle."""
        key = (clock_mhz, temperature_c, mem_clock_mhz)
        last = self.__dict__.get("_last_power")  # not a field: the simulator asks twice in a row
        if last is not None and last[1] is workload and last[0] == key:
            return last[2]
        power = self._gpu_power_w(clock_mhz, temperature_c, workload, mem_clock_mhz)
        self.__dict__["_last_power"] = (key, workload, power)
        return power

    def _gpu_power_w(
        self,
        clock_mhz: float,
        temperature_c: float,
        workload: Optional[Workload],
        mem_clock_mhz: Optional[float],
    ) -> float:
        mem_clock = mem_clock_mhz if mem_clock_mhz is not None else self.default_mem_clock_mhz
        static = self.static_w * (1.0 + self.leakage_per_c * (temperature_c - self.ambient_c))
        # only the static part moves with temperature: the rest is remembered per clock,
        # workload and memory clock, and added in the same order (the same sum, bit for bit)
        cache = self.__dict__.get("_terms_cache")  # not a field: eq/hash unchanged
        if cache is None:
            cache = self.__dict__["_terms_cache"] = {}
        key = (clock_mhz, mem_clock, id(workload))
        terms = cache.get(key)
        if terms is None or terms[0] is not workload:
            if len(cache) >= 4096:  # arbitrary clocks (fits, benches): stay bounded
                cache.clear()
            terms = cache[key] = (workload,) + self._clock_terms(clock_mhz, workload, mem_clock)
        _, mem_bg_w, load_mem_w, dynamic_w, factor = terms
        power = max(0.0, static) + mem_bg_w
        if load_mem_w is not None:
            power += load_mem_w
        power += dynamic_w
        if factor is not None:
            power *= factor
        return power

    def _clock_terms(
        self, clock_mhz: float, workload: Optional[Workload], mem_clock: Optional[float]
    ) -> Tuple[float, Optional[float], float, Optional[float]]:
        """The parts of the GPU's power that do not depend on temperature: the memory's
        background power, the workload's memory power (None idle), the dynamic power
        (activity · α·f·V²) and the workload's measured power factor (None: none)."""
        mem_bg_w = self.mem_background_w(mem_clock)
        load_mem_w: Optional[float] = None
        if workload is None:
            activity = self.idle_activity
            curve = self.voltage
        else:
            u = workload.busy_fraction(clock_mhz, mem_clock)
            activity = workload.a_stall + workload.a_busy * u
            curve = workload.voltage or self.voltage
            load_mem_w = workload.mem_w
            if (
                self.mem_traffic_scales
                and mem_clock is not None
                and mem_clock != self.default_mem_clock_mhz
                and workload.mem_s > 0
            ):  # bytes per unit of work fixed: power follows 1/t (models.memory)
                load_mem_w *= workload._model_time_s(
                    clock_mhz, self.default_mem_clock_mhz
                ) / workload._model_time_s(clock_mhz, mem_clock)
        if self.mem_floor_v:
            curve = self._curve_at_mem(curve, mem_clock)
            dynamic_w = curve.dynamic_w(clock_mhz, self.dyn_w_per_mhz) * activity
        else:
            dynamic_w = (
                formulas.cmos_power_w(
                    clock_mhz, self.dyn_w_per_mhz, curve.ridge_mhz, curve.beta_per_mhz
                )
                * activity
            )
        factor: Optional[float] = None
        if workload is not None and workload.power_factor and workload.at_main_mem_clock(mem_clock):
            factor = factor_at(workload.power_factor, clock_mhz)
        return mem_bg_w, load_mem_w, dynamic_w, factor

    def mem_floor_at(self, mem_clock_mhz: Optional[float]) -> float:
        """The voltage floor at a memory clock: 1 at the default one, ``mem_floor_v`` where
        measured, linear in the memory clock in between (clipped to (0, 1])."""
        known = dict(self.mem_floor_v)
        if self.default_mem_clock_mhz is not None:
            known.setdefault(self.default_mem_clock_mhz, 1.0)
        if mem_clock_mhz is None or not known:
            return 1.0
        if mem_clock_mhz in known:
            return float(known[mem_clock_mhz])
        if len(known) < 2:
            return float(next(iter(known.values())))
        m1, m2 = sorted(known, key=lambda m: abs(m - mem_clock_mhz))[:2]
        v1, v2 = known[m1], known[m2]
        return float(min(1.0, max(1e-3, v1 + (v2 - v1) * (mem_clock_mhz - m1) / (m2 - m1))))

    def _curve_at_mem(self, curve: VoltageCurve, mem_clock_mhz: Optional[float]) -> VoltageCurve:
        floor = self.mem_floor_at(mem_clock_mhz)
        if floor == curve.floor_v:
            return curve
        cache = self.__dict__.setdefault("_curve_cache", {})  # not a field: eq/hash unchanged
        key = (curve, floor)
        if key not in cache:
            cache[key] = VoltageCurve(curve.ridge_mhz, curve.beta_per_mhz, floor)
        return cache[key]

    def steady_temperature_c(self, power_w: float) -> float:
        return self.ambient_c + self.thermal_r_c_per_w * power_w

    def steady_gpu_power_w(
        self, clock_mhz: float, workload: Optional[Workload], mem_clock_mhz: Optional[float] = None
    ) -> float:
        """GPU power (W) once temperature has settled at this clock: the fixed point of
        P = P(T) with T = T_amb + R·P (closed form, since leakage is linear in T)."""
        p_ambient = self.gpu_power_w(clock_mhz, self.ambient_c, workload, mem_clock_mhz)
        gain = self.static_w * self.leakage_per_c * self.thermal_r_c_per_w
        return p_ambient / (1.0 - gain)

    def domain_powers_w(self, gpu_power_w: float) -> Dict[str, float]:
        powers = dict(self.domains_w)
        powers["gpu"] = gpu_power_w
        return powers

    def rail_powers_w(self, gpu_power_w: float) -> Dict[str, float]:
        """Power on each rail (W) given the GPU domain's power."""
        return {name: fixed + share * gpu_power_w for name, fixed, share in self._rail_terms()}

    def _rail_terms(self) -> Tuple[Tuple[str, float, float], ...]:
        """Each rail's power as ``fixed + share·P_gpu`` (the other domains are constant): the
        sums over domains are done once per board, not on every sensor read."""
        cache = self.__dict__.get("_rail_terms_cache")  # not a field: eq/hash unchanged
        if cache is None:
            others = self.domain_powers_w(0.0)
            terms = []
            for rail in self.rails:
                if rail.input:
                    eff = self.regulator_efficiency
                    terms.append((rail.name, sum(others.values()) / eff, 1.0 / eff))
                else:
                    fixed = sum(others.get(d, 0.0) for d in rail.domains if d != "gpu")
                    terms.append((rail.name, fixed, 1.0 if "gpu" in rail.domains else 0.0))
            cache = self.__dict__["_rail_terms_cache"] = tuple(terms)
        return cache

    def board_power_w(self, gpu_power_w: float) -> float:
        """The whole board's input power (W): every domain through the regulators on a Jetson
        (what ``VDD_IN`` reads where the board has it), the card itself on a datacenter GPU."""
        if self.kind == "jetson" or any(r.input for r in self.rails):
            return sum(self.domain_powers_w(gpu_power_w).values()) / self.regulator_efficiency
        return gpu_power_w

    def module_rails(self) -> Tuple[str, ...]:
        """Rails that together cover every domain once (for a board without an input rail,
        whose input is their sum through the regulators)."""
        seen: set = set()
        out = []
        for rail in sorted(self.rails, key=lambda r: -len(r.domains)):
            if rail.input or not rail.domains or seen.intersection(rail.domains):
                continue
            seen.update(rail.domains)
            out.append(rail.name)
        return tuple(out)

    def limited_power_w(self, gpu_power_w: float) -> float:
        """The figure the power limit applies to: the card on datacenter boards, the whole
        module on Jetson boards (its rating)."""
        if self.kind == "jetson":
            # the domains' powers in domain_powers_w's order (the same sum), the GPU's filled in
            terms = self.__dict__.get("_limit_terms")  # not a field: eq/hash unchanged
            if terms is None:
                powers = self.domain_powers_w(0.0)
                terms = self.__dict__["_limit_terms"] = (
                    list(powers.values()),
                    list(powers).index("gpu"),
                )
            values, at = terms
            values = list(values)
            values[at] = gpu_power_w
            return sum(values) / self.regulator_efficiency
        return gpu_power_w

    def throttled_point(
        self,
        wanted_mhz: float,
        temperature_c: float,
        workload: Optional[Workload],
        power_limit_w: float,
        mem_clock_mhz: Optional[float] = None,
        hint_mhz: Optional[float] = None,
    ) -> Tuple[float, bool, float]:
        """The highest table clock ≤ ``wanted_mhz`` whose power fits the limit, whether that
        is below what was wanted (throttled), and the GPU power there (W, evaluated by the
        search already). Never below the lowest clock. ``hint_mhz`` (the last answer) is
        checked first: two evaluations when it still holds."""
        table = self.clocks_mhz
        n = bisect.bisect_right(table, wanted_mhz + 1e-9) or 1  # candidates: table[:n]
        # the clock wanted fits (the common case): no search
        power = self.gpu_power_w(table[n - 1], temperature_c, workload, mem_clock_mhz)
        if self.limited_power_w(power) <= power_limit_w:
            return table[n - 1], False, power
        powers: Dict[int, float] = {n - 1: power}

        def fits(i: int) -> bool:
            power = powers[i] = self.gpu_power_w(table[i], temperature_c, workload, mem_clock_mhz)
            return self.limited_power_w(power) <= power_limit_w

        def answer(i: int, throttled: bool) -> Tuple[float, bool, float]:
            power = powers.get(i)
            if power is None:
                power = self.gpu_power_w(table[i], temperature_c, workload, mem_clock_mhz)
            return table[i], throttled, power

        if hint_mhz is not None:
            i = bisect.bisect_left(table, hint_mhz - 1e-9)
            if i < n - 1 and table[i] == hint_mhz and fits(i) and not fits(i + 1):
                return answer(i, True)
        # power rises with the clock (f·u(f) = c/t(f) grows), so bisect for the last fit
        lo, hi = 0, n - 1  # fits(hi) is False
        if not fits(0):
            return answer(0, table[0] < wanted_mhz)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid
        return answer(lo, True)

    # -- the truth, for tests and benches ---------------------------------------------
    def steady_energy_per_unit_j(
        self, clock_mhz: float, workload: Workload, mem_clock_mhz: Optional[float] = None
    ) -> float:
        """Energy per unit of work (J) at a clock in thermal steady state, ignoring the cap."""
        return self.steady_gpu_power_w(
            clock_mhz, workload, mem_clock_mhz
        ) * workload.time_per_unit_s(
            clock_mhz, mem_clock_mhz if mem_clock_mhz is not None else self.default_mem_clock_mhz
        )

    def max_clock_mhz(self, power_mode: Optional[str] = None) -> float:
        cache = self.__dict__.setdefault("_max_clock_cache", {})  # not a field: eq/hash unchanged
        top = cache.get(power_mode)
        if top is None:
            cap = self.power_modes.get(power_mode, math.inf) if power_mode else math.inf
            allowed = [c for c in self.clocks_mhz if c <= cap + 1e-9]
            top = cache[power_mode] = allowed[-1] if allowed else self.clocks_mhz[0]
        return top


def clock_table(spec: object) -> Tuple[float, ...]:
    """Expand a catalog clock table: a list of MHz or ``{min, max, step}``."""
    if isinstance(spec, Mapping):
        lo, hi, step = float(spec["min"]), float(spec["max"]), float(spec["step"])
        n = int(round((hi - lo) / step))
        return tuple(round(lo + i * step, 3) for i in range(n + 1))
    if isinstance(spec, Sequence):
        return tuple(float(c) for c in spec)
    raise ValueError(f"invalid clock table {spec!r}")
