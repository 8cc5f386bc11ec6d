"""The calibration procedure: probe a few clocks, fit, refine near the optimum.

1. Read idle power (devices that can idle; not counted as a probe).
2. Run the load at a few clocks spread over the range, each until power is steady, and
   measure power, throughput, clock, temperature and throttle reasons.
3. Fit P(f) (ridge point) and t(f); the PPW-optimal clock minimises E(f) = P(f)·t(f).
4. Probe the predicted optimum, then between it and its probed neighbours, until the
   optimum is pinned (its neighbours in the clock table are probed); budget left after that
   goes to the runner-up, the unprobed clock with the least predicted energy. An optimum
   next to a probe inside a wide unprobed gap is replaced by a golden-section step into the
   gap (``_split_gap``). A probe goes instead where the answer can still change when the
   probes alone say so: the unprobed clock of a wide gap whose convex lower bound (the
   secants of the probes on either side, extended into the gap) lies furthest below the best
   measured energy, by more than the measured noise (``_where_it_can_change``).
5. Choose the probed clock with the least measured energy per unit of work among the
   optimum, its probed neighbours and the runners-up: near the optimum the probes are
   trusted over the model.

When the models do not explain the measurements (a real GPU the models were not made for,
a noisy sweep), calibration still answers: the best measured probe, refined by probing its
neighbours in the clock table while the budget lasts. The result says so
(``method == "best-probe"``, a warning, the fit's complaint and the raw points kept);
otherwise ``method == "model"``. A curve whose best probes lie within the measured noise of
each other is reported flat (``flat_clocks_mhz``, a note): any of them is as good as the
measurements can tell.

A probe is one distinct clock measured under load. :class:`DeviceProber` measures a live
device (simulated or real); :class:`ReplayProber` reads a recorded sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    SupportsFloat,
    Tuple,
)

from governor.calibrate.loads import Load
from governor.devices.base import Device, RecordedDevice
from governor.documents import DocReader
from governor.errors import CalibrationError, InvalidRequestError
from governor.measure.window import measure_window, wait_steady

if TYPE_CHECKING:
    from governor.models.power import PowerModel
    from governor.models.time import TimeModel

__all__ = [
    "CalibrationResult",
    "DeviceProber",
    "Probe",
    "Prober",
    "ReplayProber",
    "calibrate",
    "choose_initial_clocks",
]

INITIAL_FRACTIONS = (0.0, 0.45, 0.75, 1.0)
MIN_PROBES = 4
#: an unprobed optimum closer than this share of its gap to a probed clock is not probed...
GAP_NEAR_FRACTION = 0.25
#: ...when the gap spans at least this many table steps; a golden-section step is instead
GAP_MIN_STEPS = 8
#: the golden-section step, as a share of the longer side (1 - 1/φ)
GOLDEN_STEP = 0.382


@dataclass(frozen=True)
class Probe:
    """One clock measured under load. ``status`` is ``ok``, ``throttled`` or ``unsteady``."""

    requested_mhz: float
    clock_mhz: float
    power_w: float
    time_per_unit_s: float
    temperature_c: Optional[float] = None
    throttle_reasons: Tuple[str, ...] = ()
    status: str = "ok"
    window_s: float = 0.0
    method: str = ""

    @property
    def energy_per_unit_j(self) -> float:
        return self.power_w * self.time_per_unit_s

    @property
    def throttled(self) -> bool:
        return self.status == "throttled"

    def to_dict(self) -> Dict[str, object]:
        return {
            "requested_mhz": self.requested_mhz,
            "clock_mhz": self.clock_mhz,
            "power_w": self.power_w,
            "time_per_unit_s": self.time_per_unit_s,
            "energy_per_unit_j": self.energy_per_unit_j,
            "temperature_c": self.temperature_c,
            "throttle_reasons": list(self.throttle_reasons),
            "status": self.status,
            "window_s": self.window_s,
            "method": self.method,
        }

    @classmethod
    def from_dict(
        cls, doc: Mapping[str, object], where: str = "probe", path: object = None
    ) -> Probe:
        """The probe of :meth:`to_dict`'s object (one of a profile's ``probes`` at ``where``
        in the file ``path``).

        Raises:
            ProfileError: a field missing or of the wrong type (names the file and the field).
        """
        r = DocReader.of(doc, where, path)
        return cls(
            requested_mhz=r.float("requested_mhz"),
            clock_mhz=r.float("clock_mhz"),
            power_w=r.float("power_w"),
            time_per_unit_s=r.float("time_per_unit_s"),
            temperature_c=r.optional_float("temperature_c"),
            throttle_reasons=tuple(r.list_of_str("throttle_reasons", ())),
            status=r.str("status", "ok"),
            window_s=r.float("window_s", 0.0),
            method=r.str("method", ""),
        )


class Prober:
    """Measures the load at a clock. Subclasses: live devices and recorded sweeps."""

    device: Device

    def supported_clocks_mhz(self) -> Tuple[float, ...]:
        return self.device.supported_clocks_mhz()

    def idle_power_w(self) -> Optional[float]:
        return None

    def probe(self, clock_mhz: float) -> Probe:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def device_time_s(self) -> float:
        """Device time spent under load so far (s)."""
        return 0.0

    def finish(self) -> None:
        """Stop the load and restore the device."""


def _finite_seconds(value: object) -> bool:
    """Whether ``value`` is a finite real number (not a bool)."""
    try:
        if isinstance(value, bool) or not isinstance(value, (str, SupportsFloat)):
            return False
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


class DeviceProber(Prober):
    """Probes a live device: lock the clock, wait for steady power, measure a window."""

    def __init__(
        self,
        device: Device,
        load: Load,
        *,
        window_s: float = 1.5,
        min_settle_s: float = 1.2,
        max_settle_s: float = 6.0,
        idle_s: float = 2.0,
    ) -> None:
        for name, span in (
            ("window_s", window_s),
            ("min_settle_s", min_settle_s),
            ("max_settle_s", max_settle_s),
            ("idle_s", idle_s),
        ):
            if not _finite_seconds(span):
                raise InvalidRequestError(
                    f"{name} must be a finite number of seconds, not {span!r}"
                )
        if window_s <= 0 or min_settle_s < 0 or max_settle_s < min_settle_s or idle_s < 0:
            raise InvalidRequestError(
                "calibration windows must be positive: window_s > 0, idle_s >= 0 and "
                f"0 <= min_settle_s <= max_settle_s; got {window_s!r}, {idle_s!r}, "
                f"{min_settle_s!r}, {max_settle_s!r}"
            )
        if not device.capabilities.lock_gpu_clocks:
            raise InvalidRequestError(
                f"{device.uri} cannot lock its GPU clock, so it cannot be calibrated"
            )
        self.device = device
        self.load = load
        self.window_s = window_s
        self.min_settle_s = min_settle_s
        self.max_settle_s = max_settle_s
        self.idle_s = idle_s
        self._running = False
        self._loaded_s = 0.0
        self._period_s = 0.1

    @property
    def device_time_s(self) -> float:
        return self._loaded_s

    def idle_power_w(self) -> Optional[float]:
        if self.idle_s <= 0:
            return None
        if self._running:
            self.load.stop()
            self._running = False
        self.device.clock.sleep(self.idle_s)
        window = measure_window(self.device, 1.0, period_s=self._period_s)
        return window.mean_power_w

    def probe(self, clock_mhz: float) -> Probe:
        dev = self.device
        applied, _ = dev.lock_gpu_clocks(clock_mhz)
        t0 = dev.clock.now_s()
        if not self._running:
            self.load.start()
            self._running = True
        wait_steady(
            dev, min_wait_s=self.min_settle_s, max_wait_s=self.max_settle_s, period_s=self._period_s
        )
        self.load.check()
        window = measure_window(
            dev, self.window_s, work_done=self.load.work_done, period_s=self._period_s
        )
        self.load.check()
        self._loaded_s += dev.clock.now_s() - t0
        if window.time_per_unit_s is None:
            raise CalibrationError(
                f"the load did no measurable work in {self.window_s:g} s at {applied:g} MHz; "
                "use a longer --window-s or a load with shorter runs"
            )
        reasons = tuple(sorted(window.throttle_reasons - {"clocks_setting", "idle"}))
        measured = window.mean_clock_mhz if window.mean_clock_mhz is not None else applied
        throttled = bool(reasons) or measured < applied * 0.995
        return Probe(
            requested_mhz=applied,
            clock_mhz=measured,
            power_w=window.mean_power_w,
            time_per_unit_s=window.time_per_unit_s,
            temperature_c=window.temperature_c,
            throttle_reasons=reasons,
            status="throttled" if throttled else "ok",
            window_s=window.duration_s,
            method=window.method,
        )

    def finish(self) -> None:
        if self._running:
            self.load.stop()
            self._running = False
        self.device.restore()


class ReplayProber(Prober):
    """Probes a replay device: each probe returns the measured row."""

    def __init__(self, device: Device) -> None:
        if not isinstance(device, RecordedDevice):
            raise InvalidRequestError(f"{device.uri} is not a replay device")
        self.device: RecordedDevice = device

    def probe(self, clock_mhz: float) -> Probe:
        row = self.device.probe(clock_mhz)
        return Probe(
            requested_mhz=float(
                clock_mhz
            ),  # the table clock asked for; the row's request may differ
            clock_mhz=float(row["clock_mhz"]),
            power_w=float(row["power_w"]),
            time_per_unit_s=float(row["time_per_unit_s"]),
            status="throttled" if row["throttled"] else "ok",
            method="replay",
        )


@dataclass
class CalibrationResult:
    device_uri: str
    idle_power_w: Optional[float]
    probes: List[Probe]
    power_model: Optional[PowerModel]  # None: a best-probe result
    time_model: Optional[TimeModel]
    ridge_clock_mhz: float
    ppw_optimal_clock_mhz: float
    predicted_optimum_mhz: float
    supported_clocks_mhz: Tuple[float, ...]
    device_time_s: float
    notes: List[str] = field(default_factory=list)
    #: "model" (the fitted models chose) or "best-probe" (they did not explain the data)
    method: str = "model"
    warnings: List[str] = field(default_factory=list)
    #: what the failed fit kept (its message, model and points) when method is best-probe
    fit_error: Optional[Dict[str, object]] = None
    #: the clocks that may be the energy optimum (models.optimum.OptimumInterval); None for a
    #: best-probe result, which has no model to tell them apart
    optimum_interval: Optional[object] = None
    #: the probed clocks (MHz) whose measured energy lies within the noise band of the best
    #: probe's, when there are two or more: the curve is flat there within the measured noise
    flat_clocks_mhz: Tuple[float, ...] = ()
    #: the noise band (relative energy) that decided ``flat_clocks_mhz``
    noise_band_rel: float = math.nan

    @property
    def flat(self) -> bool:
        """Whether several probed clocks are within the measured noise of the best."""
        return len(self.flat_clocks_mhz) >= 2

    @property
    def probe_clocks_mhz(self) -> List[float]:
        return [p.requested_mhz for p in self.probes]

    @property
    def modelled(self) -> bool:
        return self.method == "model" and self.power_model is not None

    def energy_per_unit_j(self, clock_mhz):
        """Energy per unit of work (J) at ``clock_mhz``: modelled, or for a best-probe result
        interpolated between the measured probes."""
        if self.method == "model" and self.power_model is not None and self.time_model is not None:
            return self.power_model.power_w(clock_mhz) * self.time_model.time_s(clock_mhz)
        return _interpolate(self.probes, clock_mhz, lambda p: p.energy_per_unit_j)

    def time_per_unit_s(self, clock_mhz):
        """Time per unit of work (s) at ``clock_mhz``, modelled or interpolated."""
        if self.modelled and self.time_model is not None:
            return self.time_model.time_s(clock_mhz)
        return _interpolate(self.probes, clock_mhz, lambda p: p.time_per_unit_s)


def _interpolate(probes: Sequence[Probe], clock_mhz: float, value: Callable[[Probe], float]):
    """Piecewise-linear interpolation of a measured quantity over the probed clocks (held
    constant beyond the ends)."""
    import numpy as np

    pts = sorted(probes, key=lambda p: p.requested_mhz)
    xs = [p.requested_mhz for p in pts]
    ys = [value(p) for p in pts]
    out = np.interp(np.asarray(clock_mhz, dtype=float), xs, ys)
    return float(out) if np.ndim(out) == 0 else out


def choose_initial_clocks(
    clocks: Sequence[float], fractions: Sequence[float] = INITIAL_FRACTIONS
) -> List[float]:
    """Supported clocks nearest the given fractions of the clock range, without repeats."""
    lo, hi = clocks[0], clocks[-1]
    chosen: List[float] = []
    for frac in fractions:
        target = lo + frac * (hi - lo)
        for c in sorted(clocks, key=lambda c: abs(c - target)):
            if c not in chosen:
                chosen.append(c)
                break
    return sorted(chosen)


def _fit(probes: List[Probe], idle_w: Optional[float]) -> Tuple[PowerModel, TimeModel]:
    from governor.models.power import fit_power_model
    from governor.models.time import fit_time_model

    pts = sorted(probes, key=lambda p: p.clock_mhz)
    flags = [p.throttled for p in pts]
    power = fit_power_model(
        [p.clock_mhz for p in pts],
        [p.power_w for p in pts],
        capped=flags if any(flags) else None,
        p_idle_w=idle_w,
    )
    time = fit_time_model([p.clock_mhz for p in pts], [p.time_per_unit_s for p in pts])
    return power, time


class _FitFailed(Exception):
    """A fit that did not explain the probes (as opposed to a probe that failed)."""

    def __init__(self, error: CalibrationError) -> None:
        super().__init__(str(error))
        self.error = error


def _fit_or_fail(probes: List[Probe], idle_w: Optional[float]) -> Tuple[PowerModel, TimeModel]:
    try:
        return _fit(probes, idle_w)
    except CalibrationError as err:
        raise _FitFailed(err) from err


def _below_the_cap(clocks: Sequence[float], probes: List[Probe]) -> Optional[float]:
    """The highest unprobed clock below where the power limit bit: the measured clock of the
    lowest throttled probe tells where the firmware could hold the load."""
    capped = [p for p in probes if p.throttled]
    if not capped:
        return None
    # 3 % below the clock the firmware held: about 8 % less power (P ~ f·V²), clear of the cap
    ceiling = 0.97 * min(min(p.clock_mhz, p.requested_mhz) for p in capped)
    ok = [p.requested_mhz for p in probes if not p.throttled]
    floor = max(ok) if ok else -math.inf
    probed = {p.requested_mhz for p in probes}
    below = [c for c in clocks if floor < c <= ceiling and c not in probed]
    return below[-1] if below else None


def _split_gap(clocks: Sequence[float], probed: Sequence[float], optimum: float) -> float:
    """Where to probe for an unprobed predicted optimum: the optimum itself, unless it lies
    inside a wide gap between probed clocks but close to one of its ends, in which case a
    golden-section step from the optimum into the longer side of the gap.

    Next to a probe the model says little: one or two table steps on a fine table (15 MHz of
    60 clocks) change the energy by about the noise, so a probe there cannot tell the two
    apart, while the rest of the gap was never measured. "Close" is relative to the gap
    (``GAP_NEAR_FRACTION`` of it), "wide" relative to the table's resolution (at least
    ``GAP_MIN_STEPS`` table steps), so coarse tables, where a neighbour is a large step, and
    gaps the refinement has already narrowed keep probing the optimum itself. This is the
    safeguard of Brent's minimiser: a model step that would land next to a known point is
    replaced by a golden-section step.
    """
    i = clocks.index(optimum)
    left = [clocks.index(c) for c in probed if c < optimum]
    right = [clocks.index(c) for c in probed if c > optimum]
    if not left or not right:
        return optimum
    j_left, j_right = max(left), min(right)
    gap = j_right - j_left
    if gap < GAP_MIN_STEPS or min(i - j_left, j_right - i) >= GAP_NEAR_FRACTION * gap:
        return optimum
    if i - j_left > j_right - i:
        j = i - int(round(GOLDEN_STEP * (i - j_left)))
    else:
        j = i + int(round(GOLDEN_STEP * (j_right - i)))
    return clocks[j]


def _next_clock(
    clocks: Sequence[float], probed: Sequence[float], optimum: float, energy: Callable
) -> Optional[float]:
    """The predicted optimum if unprobed (or a golden-section step into its gap when it lies
    next to a probe in a wide gap, :func:`_split_gap`), else the better midpoint between it
    and the nearest probed clocks on either side; None when the optimum's table neighbours
    are all probed."""
    if optimum not in probed:
        return _split_gap(clocks, probed, optimum)
    i = clocks.index(optimum)
    candidates = []
    left = [clocks.index(c) for c in probed if c < optimum]
    right = [clocks.index(c) for c in probed if c > optimum]
    j_left = max(left) if left else 0
    j_right = min(right) if right else len(clocks) - 1
    for j in ((i + j_left) // 2, (i + j_right + 1) // 2):
        if clocks[j] not in probed:
            candidates.append(clocks[j])
    if not candidates:
        return None
    return min(candidates, key=energy)


def _next_to_best(clocks: Sequence[float], probes: List[Probe]) -> Optional[float]:
    """Without a model: the unprobed clock halfway between the best measured probe and its
    nearest probed neighbour, on the side whose neighbour measured less energy first; None
    when both table neighbours of the best probe are probed."""
    usable = [p for p in probes if not p.throttled] or probes
    best = min(usable, key=lambda p: p.energy_per_unit_j)
    energy_at = {p.requested_mhz: p.energy_per_unit_j for p in probes}
    probed = set(energy_at)
    i = clocks.index(best.requested_mhz) if best.requested_mhz in clocks else None
    if i is None:
        return None
    sides = []
    left = [j for j, c in enumerate(clocks) if c in probed and j < i]
    right = [j for j, c in enumerate(clocks) if c in probed and j > i]
    j_left = max(left) if left else 0
    j_right = min(right) if right else len(clocks) - 1
    for j_edge, j in ((j_left, (i + j_left) // 2), (j_right, (i + j_right + 1) // 2)):
        if clocks[j] not in probed:
            sides.append((energy_at.get(clocks[j_edge], math.inf), clocks[j]))
    if not sides:
        return None
    return min(sides)[1]


def _convex_bounds(clocks: Sequence[float], probes: List[Probe]) -> Dict[float, float]:
    """Lower bounds of the energy per unit (J) at the unprobed clocks of wide gaps (at least
    ``GAP_MIN_STEPS`` table steps between probed clocks), from the measurements alone.

    Were E(f) convex, it would lie above the secant through any two neighbouring probes
    extended beyond them; a clock between two probes is bounded by the secant from its left
    (the two probes below it) and the one from its right (the two above), and the larger
    bound holds. Clocks bounded from one side only inside the probed range are left out (a
    single secant says nothing about how low they may go); beyond the probed range the
    nearest secant bounds them. No bounds while a probe is power-capped."""
    if any(p.throttled for p in probes):
        return {}  # a power-capped probe ran below the clock asked: no secant through it
    measured = {p.requested_mhz: p.energy_per_unit_j for p in probes}
    xs = sorted(measured)
    if len(xs) < 3:
        return {}
    ys = [measured[x] for x in xs]
    index = {c: j for j, c in enumerate(clocks)}
    bounds: Dict[float, float] = {}
    for c in clocks:
        if c in measured:
            continue
        k = sum(x < c for x in xs)  # probes below c
        lo = index.get(xs[k - 1], 0) if k > 0 else 0
        hi = index.get(xs[k], len(clocks) - 1) if k < len(xs) else len(clocks) - 1
        if hi - lo < GAP_MIN_STEPS:
            continue
        sides = []
        if k >= 2:
            slope = (ys[k - 1] - ys[k - 2]) / (xs[k - 1] - xs[k - 2])
            sides.append(ys[k - 1] + slope * (c - xs[k - 1]))
        if len(xs) - k >= 2:
            slope = (ys[k + 1] - ys[k]) / (xs[k + 1] - xs[k])
            sides.append(ys[k] + slope * (c - xs[k]))
        if sides and (len(sides) == 2 or k == 0 or k == len(xs)):
            bounds[c] = max(sides)
    return bounds


def _where_it_can_change(
    clocks: Sequence[float], probes: List[Probe], band_rel: float
) -> Optional[float]:
    """The unprobed clock where a probe can still change the answer: the least convex lower
    bound (:func:`_convex_bounds`), if that bound lies more than ``band_rel`` (the measured
    noise) below the best measured energy; None when no clock can beat the best probe by
    more than noise."""
    bounds = _convex_bounds(clocks, probes)
    if not bounds:
        return None
    best = _best_measured(probes)
    clock = min(bounds, key=lambda c: bounds[c])
    return clock if bounds[clock] < best * (1.0 - band_rel) else None


def _fit_noise_rel(probes: List[Probe], energy: Callable[[float], float]) -> float:
    """Robust spread of the fitted energy's relative error at the unthrottled probes (the
    measured noise the models see; median |error| / 0.6745)."""
    errs = sorted(
        abs(energy(p.requested_mhz) / p.energy_per_unit_j - 1.0)
        for p in probes
        if not p.throttled and p.energy_per_unit_j > 0
    )
    if not errs:
        return math.nan
    mid = len(errs) // 2
    median = errs[mid] if len(errs) % 2 else 0.5 * (errs[mid - 1] + errs[mid])
    return median / 0.6745


def _best_measured(probes: List[Probe]) -> float:
    """The least measured energy per unit (J) of the unthrottled probes (all if none is)."""
    usable = [p for p in probes if not p.throttled] or probes
    return min(p.energy_per_unit_j for p in usable)


def _flat_clocks(probes: List[Probe], band_rel: float) -> Tuple[float, ...]:
    """The unthrottled probed clocks whose measured energy is within ``band_rel`` of the
    least measured, when there are two or more (a flat curve); else ()."""
    usable = [p for p in probes if not p.throttled]
    if not usable:
        return ()
    best = min(p.energy_per_unit_j for p in usable)
    near = sorted(
        {p.requested_mhz for p in usable if p.energy_per_unit_j <= best * (1.0 + band_rel)}
    )
    return tuple(near) if len(near) >= 2 else ()


def _runner_up(
    clocks: Sequence[float], by_clock: Dict[float, Probe], energy: Callable
) -> Optional[float]:
    """The unprobed clock the model predicts the least energy for (the most likely
    alternative to a pinned optimum); None when every clock is probed."""
    rest = [c for c in clocks if c not in by_clock]
    return min(rest, key=energy) if rest else None


def _choose(
    probes: List[Probe],
    optimum: float,
    energy: Callable[[float], float],
    runners_up: Sequence[float] = (),
) -> float:
    """Near the optimum, trust the probes: the least measured energy among the model's
    optimum, the probed clocks on either side of it and the runner-up clocks probed with
    budget to spare. An optimum the budget left unprobed stands only if the model promises
    less energy there than the best probe measured."""
    usable = sorted((p for p in probes if not p.throttled), key=lambda p: p.requested_mhz)
    at = [p for p in usable if p.requested_mhz == optimum]
    if not at:
        best = min(usable or probes, key=lambda p: p.energy_per_unit_j)
        return optimum if energy(optimum) < best.energy_per_unit_j else best.requested_mhz
    below = [p for p in usable if p.requested_mhz < optimum][-1:]
    above = [p for p in usable if p.requested_mhz > optimum][:1]
    extra = [p for p in usable if p.requested_mhz in runners_up]
    return min(below + at + above + extra, key=lambda p: p.energy_per_unit_j).requested_mhz


def calibrate(
    prober: Prober,
    *,
    max_probes: int = 6,
    measure_idle: bool = True,
    on_probe: Optional[Callable[[int, Probe], None]] = None,
) -> CalibrationResult:
    """Run the calibration procedure (see module docstring) and return its result.

    Raises:
        InvalidRequestError: a probe budget below 4 or a device with fewer than 3 clocks.

    A fit that does not explain the measurements is not an error: the result then answers
    with the best measured probe (``method == "best-probe"``) and says why in ``warnings``.
    """
    if not isinstance(max_probes, int) or max_probes < MIN_PROBES:
        raise InvalidRequestError(f"--max-probes must be at least {MIN_PROBES}, got {max_probes!r}")
    clocks = list(prober.supported_clocks_mhz())
    if len(clocks) < 3:
        raise InvalidRequestError(
            f"{prober.device.uri} supports only {len(clocks)} clock(s): nothing to calibrate"
        )
    probes: List[Probe] = []
    by_clock: Dict[float, Probe] = {}
    idle_w = prober.idle_power_w() if measure_idle else None
    notes: List[str] = []

    def take(clock: float) -> None:
        probe = prober.probe(clock)
        probes.append(probe)
        by_clock[clock] = probe
        if on_probe:
            on_probe(len(probes), probe)

    power: Optional[PowerModel] = None
    time: Optional[TimeModel] = None
    optimum = math.nan
    spare: List[float] = []  # runner-up clocks probed after the optimum was pinned
    failure: Optional[CalibrationError] = None
    from governor.models.optimum import noise_band_rel

    try:
        for clock in choose_initial_clocks(clocks)[:max_probes]:
            take(clock)
        # Throttled probes only tell P_max: the CMOS law needs four unthrottled clocks.
        while len(probes) < max_probes and sum(not p.throttled for p in probes) < MIN_PROBES:
            nxt = _below_the_cap(clocks, probes)
            if nxt is None:
                break
            take(nxt)
        try:
            power, time = _fit_or_fail(probes, idle_w)

            def energy(clock: float) -> float:
                assert power is not None and time is not None  # set just above
                return power.power_w(clock) * time.time_s(clock)

            optimum = min(clocks, key=energy)
            while len(probes) < max_probes:
                nxt = _next_clock(clocks, list(by_clock), optimum, energy)
                if nxt is None:
                    # the optimum is pinned with budget to spare: measure the runner-up
                    nxt = _runner_up(clocks, by_clock, energy)
                    if nxt is None:
                        break
                    spare.append(nxt)
                band = noise_band_rel(_fit_noise_rel(probes, energy))
                wider = _where_it_can_change(clocks, probes, band)
                if wider is not None and energy(wider) <= _best_measured(probes) * (1 + band):
                    # the probes alone say this clock may beat the best one by more than the
                    # noise, and the model cannot rule it out: it goes first, and is a
                    # candidate of the choice like a runner-up
                    nxt = wider
                    spare.append(nxt)
                take(nxt)
                power, time = _fit_or_fail(probes, idle_w)
                optimum = min(clocks, key=energy)
        except _FitFailed as err:
            failure = err.error
            # no model: refine around the best measured probe while the budget lasts
            while len(probes) < max_probes:
                nxt = _next_to_best(clocks, probes)
                if nxt is None:
                    break
                take(nxt)
    except CalibrationError as err:  # a probe failed: that is an error, points kept
        err.data = {
            "probes": [p.to_dict() for p in probes],
            "idle_power_w": idle_w,
            "fit": err.data,
        }
        raise
    finally:
        prober.finish()

    if failure is not None:
        usable = [p for p in probes if not p.throttled] or probes
        best = min(usable, key=lambda p: p.energy_per_unit_j)
        message = str(failure).replace("; raw points kept", "")
        warning = (
            f"{message}; answering with the best measured probe, {best.requested_mhz:g} MHz "
            f"({len(probes)} probes; raw points kept)"
        )
        band = noise_band_rel(math.nan)
        flat = _flat_clocks(probes, band)
        return CalibrationResult(
            device_uri=prober.device.uri,
            idle_power_w=idle_w,
            probes=probes,
            power_model=None,
            time_model=None,
            ridge_clock_mhz=math.nan,
            ppw_optimal_clock_mhz=best.requested_mhz,
            predicted_optimum_mhz=math.nan,
            supported_clocks_mhz=tuple(clocks),
            device_time_s=prober.device_time_s,
            notes=[_flat_note(flat, band)] if flat else [],
            method="best-probe",
            warnings=[warning],
            fit_error={
                "message": message,
                "probes": [p.to_dict() for p in probes],
                "idle_power_w": idle_w,
                "fit": failure.data,
            },
            flat_clocks_mhz=flat,
            noise_band_rel=band,
        )

    assert power is not None and time is not None  # no failure: the fit succeeded
    chosen = _choose(probes, optimum, energy, spare)
    if chosen != optimum:
        notes.append(
            f"the model's optimum {optimum:g} MHz is not better than the probe at {chosen:g} MHz: the probe wins"
        )
    elif optimum not in by_clock:
        notes.append(
            f"the probe budget ran out before the model's optimum {optimum:g} MHz was probed"
        )
    if not power.ridge_reached:
        notes.append("no probe lies above the fitted ridge: the ridge clock is an extrapolation")
    if any(p.throttled for p in probes):
        notes.append(
            "some probes ran at the power limit (flagged 'throttled'); P_max was fitted from them"
        )
    # the fit may put the kink below the lowest clock (voltage rising from the start): the
    # board's ridge is then its lowest clock; profiles keep ridge clocks within the table
    ridge = power.ridge_clock_mhz
    ridge = min(max(ridge, clocks[0]), clocks[-1]) if math.isfinite(ridge) else clocks[-1]
    interval = _optimum_interval(clocks, probes, power, time, chosen)
    band = interval.band_rel
    flat = _flat_clocks(probes, band)
    if flat:
        notes.append(_flat_note(flat, band))
    return CalibrationResult(
        device_uri=prober.device.uri,
        idle_power_w=idle_w,
        probes=probes,
        power_model=power,
        time_model=time,
        ridge_clock_mhz=ridge,
        ppw_optimal_clock_mhz=chosen,
        predicted_optimum_mhz=optimum,
        supported_clocks_mhz=tuple(clocks),
        device_time_s=prober.device_time_s,
        notes=notes,
        optimum_interval=interval,
        flat_clocks_mhz=flat,
        noise_band_rel=band,
    )


def _flat_note(flat: Sequence[float], band_rel: float) -> str:
    clocks = ", ".join(f"{c:g}" for c in flat)
    return (
        f"the energy curve is flat within the measured noise: the probes at {clocks} MHz are "
        f"within {100 * band_rel:.1f} % of the best, so any of them is as good as the "
        "measurements can tell"
    )


def _optimum_interval(clocks: Sequence[float], probes: List[Probe], power, time, chosen: float):
    """The optimum's interval from the models' held-out error (models.optimum)."""
    from governor.models.optimum import optimum_interval

    return optimum_interval(
        clocks,
        [p.clock_mhz for p in probes],
        [p.power_w for p in probes],
        [p.time_per_unit_s for p in probes],
        power,
        time,
        capped=[p.throttled for p in probes],
        chosen_mhz=chosen,
    )
