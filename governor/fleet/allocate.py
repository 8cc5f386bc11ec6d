"""Split a cluster's power budget (W) across its GPUs where a watt buys the most work.

Pure functions, no I/O: the cluster service and the cluster simulator both call them.

Each GPU states a :class:`GpuDemand`: its settable cap range and, when a job runs on it, the
job's work per second at a few caps (``work_at_cap``). :func:`split_budget` gives every GPU
its lowest settable cap, then hands out the rest by exact water-filling on the upper concave
hull of each busy GPU's curve: the hull's segments, over all GPUs, are taken in order of
falling work per watt until the budget runs out (the last one partly). On concave curves
that is the exact optimum of the summed work (the fractional-knapsack argument); on a curve
that is not concave it is the optimum of its hull, which bounds the true one from above.
Watts that buy no more work (a flat curve, a GPU at its top cap) are then spread evenly over
the busy GPUs below their top cap, never above it, so a job whose curve was learned too low
still gets head room; idle GPUs stay at their lowest cap.

The curves come from the simulated boards' physics (:func:`work_curve`: a power cap runs the
GPU at the highest clock whose steady power fits, and between two table clocks at the mix of
both that averages to the cap, as NVML's power capping does), for a load anywhere between
the catalog's compute-bound (``memory_share`` 0) and memory-bound (1) workloads, and are
refined online by :class:`CurveLearner` from measured (cap, power, work rate) points.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from governor.errors import GovernorError

if TYPE_CHECKING:  # pragma: no cover
    from governor.devices.sim.physics import BoardSpec, Workload

__all__ = [
    "LOAD_SHARES",
    "BudgetTooSmallError",
    "CurveLearner",
    "GpuDemand",
    "concave_hull",
    "least_budget_w",
    "split_budget",
    "work_at",
    "work_curve",
]

#: the memory share of each named load kind (0: the catalog's compute workload, 1: memory)
LOAD_SHARES: Dict[str, float] = {"compute": 0.0, "mixed": 0.5, "memory": 1.0}

Curve = Tuple[Tuple[float, float], ...]


class BudgetTooSmallError(GovernorError, ValueError):
    """The budget is below the sum of the GPUs' lowest settable caps."""

    def __init__(self, budget_w: float, least_budget_w: float) -> None:
        super().__init__(
            f"budget {budget_w:g} W is below the sum of the GPUs' lowest settable caps; "
            f"the least budget that works is {least_budget_w:g} W"
        )
        self.budget_w = budget_w
        self.least_budget_w = least_budget_w


@dataclass(frozen=True)
class GpuDemand:
    """One GPU's part in the split: its cap range (W) and, when busy, its job's work curve."""

    gpu_id: str  # "<node>/<gpu uuid or index>"
    min_cap_w: float  # lowest settable power limit
    max_cap_w: float  # highest settable limit (default limit)
    busy: bool  # a job runs on it
    work_at_cap: Tuple[Tuple[float, float], ...] = ()  # (cap_w, work per second), caps rising

    def __post_init__(self) -> None:
        if not (0 <= self.min_cap_w <= self.max_cap_w and math.isfinite(self.max_cap_w)):
            raise ValueError(
                f"GPU {self.gpu_id}: cap range {self.min_cap_w:g}-{self.max_cap_w:g} W is invalid"
            )
        caps = [c for c, _ in self.work_at_cap]
        if any(b <= a for a, b in zip(caps, caps[1:])):
            raise ValueError(f"GPU {self.gpu_id}: work_at_cap caps must rise")
        if any(not (math.isfinite(c) and math.isfinite(w)) for c, w in self.work_at_cap):
            raise ValueError(f"GPU {self.gpu_id}: work_at_cap must be finite")


def least_budget_w(demands: Sequence[GpuDemand]) -> float:
    """The least budget (W) a split can honour: the sum of the lowest settable caps."""
    return float(sum(d.min_cap_w for d in demands))


def work_at(curve: Sequence[Tuple[float, float]], cap_w: float) -> float:
    """Work per second at ``cap_w`` on a (cap, work) curve: linear between its points, the
    end values beyond them (0 for an empty curve)."""
    if not curve:
        return 0.0
    return _interpolate(curve, [c for c, _ in curve], cap_w)


def _interpolate(curve: Sequence[Tuple[float, float]], caps: List[float], cap_w: float) -> float:
    i = bisect.bisect_right(caps, cap_w)
    if i <= 0:
        return float(curve[0][1])
    if i >= len(curve):
        return float(curve[-1][1])
    (c0, w0), (c1, w1) = curve[i - 1], curve[i]
    return float(w0 + (w1 - w0) * (cap_w - c0) / (c1 - c0))


def concave_hull(curve: Sequence[Tuple[float, float]], lo_w: float, hi_w: float) -> Curve:
    """The upper concave hull of ``curve`` restricted to caps in [lo_w, hi_w] (its values at
    the ends included), as rising (cap, work) points; flat where the curve is."""
    if hi_w <= lo_w:
        return ((lo_w, work_at(curve, lo_w)),)
    inside = [(c, w) for c, w in curve if lo_w < c < hi_w]
    points = [(lo_w, work_at(curve, lo_w)), *inside, (hi_w, work_at(curve, hi_w))]
    hull: List[Tuple[float, float]] = []
    for p in points:
        while len(hull) >= 2:
            (x0, y0), (x1, y1) = hull[-2], hull[-1]
            # drop the middle point when it lies on or under the chord to p
            if (y1 - y0) * (p[0] - x0) <= (p[1] - y0) * (x1 - x0):
                hull.pop()
            else:
                break
        hull.append(p)
    return tuple(hull)


def split_budget(demands: Sequence[GpuDemand], budget_w: float) -> Dict[str, float]:
    """Each GPU's cap (W) under ``budget_w``: every one at least its lowest cap, idle ones at
    it, the rest by marginal work per watt on each curve's concave hull; never above a GPU's
    top cap, and the caps sum to at most ``budget_w``.

    Raises:
        BudgetTooSmallError: ``budget_w`` is below :func:`least_budget_w`.
        ValueError: two demands share a ``gpu_id``.
    """
    ids = [d.gpu_id for d in demands]
    if len(set(ids)) != len(ids):
        raise ValueError("each GPU may appear once in a split")
    least = least_budget_w(demands)
    if not budget_w >= least:  # also refuses NaN
        raise BudgetTooSmallError(budget_w, least)
    caps = {d.gpu_id: float(d.min_cap_w) for d in demands}
    left = float(budget_w) - least
    busy = [d for d in demands if d.busy and d.max_cap_w > d.min_cap_w]
    # every hull segment with a positive slope: (work per watt, order, gpu, watts)
    segments = []
    for k, d in enumerate(busy):
        hull = concave_hull(d.work_at_cap, d.min_cap_w, d.max_cap_w)
        for (c0, w0), (c1, w1) in zip(hull, hull[1:]):
            if w1 > w0:
                segments.append(((w1 - w0) / (c1 - c0), k, d.gpu_id, c1 - c0))
    # slopes fall along each hull, so taking them steepest first fills each GPU in order
    segments.sort(key=lambda s: (-s[0], s[1]))
    for _, _, gpu, watts in segments:
        if left <= 0:
            break
        give = min(watts, left)
        caps[gpu] += give
        left -= give
    # watts no curve wants: evenly over the busy GPUs still below their top cap
    room = [d for d in busy if caps[d.gpu_id] < d.max_cap_w]
    while left > 1e-9 and room:
        share = left / len(room)
        for d in list(room):
            give = min(share, d.max_cap_w - caps[d.gpu_id])
            caps[d.gpu_id] += give
            left -= give
            if caps[d.gpu_id] >= d.max_cap_w - 1e-12:
                room.remove(d)
    return {gpu: _clamp(d, caps[gpu]) for gpu, d in zip(ids, demands)}


def _clamp(d: GpuDemand, cap_w: float) -> float:
    return float(min(d.max_cap_w, max(d.min_cap_w, cap_w)))


# -- curves from the board physics ------------------------------------------------------------


def blend_workload(board: BoardSpec, memory_share: float) -> Workload:
    """A load between the board's compute-bound (``memory_share`` 0) and memory-bound (1)
    catalog workloads: each parameter is interpolated."""
    from governor.devices.sim.physics import Workload

    x = min(1.0, max(0.0, float(memory_share)))
    comp, mem = board.workloads["compute"], board.workloads["memory"]
    if x == 0.0:
        return comp
    if x == 1.0:
        return mem

    def mix(a: float, b: float) -> float:
        return (1.0 - x) * a + x * b

    return Workload(
        name=f"mix-{x:.3f}",
        compute_mcycles=mix(comp.compute_mcycles, mem.compute_mcycles),
        mem_s=mix(comp.mem_s, mem.mem_s),
        overlap_k=mix(comp.overlap_k, mem.overlap_k),
        a_stall=mix(comp.a_stall, mem.a_stall),
        a_busy=mix(comp.a_busy, mem.a_busy),
        mem_w=mix(comp.mem_w, mem.mem_w),
        mem_clock_mhz=mem.mem_clock_mhz or comp.mem_clock_mhz,
        voltage=comp.voltage if x < 0.5 else mem.voltage,
    )


@dataclass(frozen=True)
class LoadCurve:
    """A load's steady behaviour on one board: work per second and power (W) at each cap."""

    idle_w: float
    #: (steady power W, work per second) at each table clock, power rising
    points: Curve
    min_cap_w: float
    max_cap_w: float

    def work_per_s(self, cap_w: float) -> float:
        """Work per second under ``cap_w``: below the lowest clock's power the GPU throttles
        towards idle (work falls linearly to 0 at idle power)."""
        p0, r0 = self.points[0]
        if cap_w >= p0:
            caps = self.__dict__.get("_caps")  # not a field: eq/hash unchanged
            if caps is None:
                caps = self.__dict__["_caps"] = [c for c, _ in self.points]
            return _interpolate(self.points, caps, cap_w)
        if p0 <= self.idle_w:
            return r0
        return max(0.0, r0 * (cap_w - self.idle_w) / (p0 - self.idle_w))

    def power_w(self, cap_w: float) -> float:
        """Steady power (W) under ``cap_w``: the cap, or the top clock's power below it."""
        return min(max(cap_w, self.idle_w), self.points[-1][0])

    def curve(self) -> Curve:
        """(cap W, work per second) points over the board's settable cap range."""
        out = self.__dict__.get("_curve")  # not a field: eq/hash unchanged
        if out is None:
            lo, hi = self.min_cap_w, self.max_cap_w
            caps = [lo] + [p for p, _ in self.points if lo < p < hi] + [hi]
            out = self.__dict__["_curve"] = tuple((c, self.work_per_s(c)) for c in caps)
        return out


#: load_curve's answers: (id(board), share) -> (board, curve); the board kept so its id
#: cannot be reused while the entry lives
_LOAD_CURVES: Dict[Tuple[int, float], Tuple[object, LoadCurve]] = {}


def load_curve(board: BoardSpec, memory_share: float) -> LoadCurve:
    """The steady (power, work per second) of a load on ``board`` at every table clock, and
    its idle power, at the board's default memory clock and thermal steady state."""
    key = (id(board), float(memory_share))
    known = _LOAD_CURVES.get(key)
    if known is not None and known[0] is board:
        return known[1]
    if len(_LOAD_CURVES) > 4096:
        _LOAD_CURVES.clear()
    curve = _load_curve(board, memory_share)
    _LOAD_CURVES[key] = (board, curve)
    return curve


def _load_curve(board: BoardSpec, memory_share: float) -> LoadCurve:
    workload = blend_workload(board, memory_share)
    mem = board.default_mem_clock_mhz
    points: List[Tuple[float, float]] = []
    for f in board.clocks_mhz:
        p = board.limited_power_w(board.steady_gpu_power_w(f, workload, mem))
        r = 1.0 / workload.time_per_unit_s(f, mem)
        if points and p <= points[-1][0]:  # keep power strictly rising
            if r > points[-1][1]:
                points[-1] = (points[-1][0], r)
            continue
        points.append((p, r))
    idle = board.limited_power_w(board.steady_gpu_power_w(board.clocks_mhz[0], None, mem))
    lo, hi = board.power_limit_range_w or (board.power_limit_w, board.power_limit_w)
    return LoadCurve(idle_w=idle, points=tuple(points), min_cap_w=lo, max_cap_w=hi)


def work_curve(board: BoardSpec, load: str = "mixed") -> Curve:
    """A job's (cap W, work per second) curve on ``board`` for a named load kind
    (``compute``, ``memory``, ``mixed``; see :data:`LOAD_SHARES`).

    Raises:
        ValueError: an unknown load kind.
    """
    if load not in LOAD_SHARES:
        raise ValueError(f"unknown load {load!r}; known: {', '.join(LOAD_SHARES)}")
    return load_curve(board, LOAD_SHARES[load]).curve()


# -- online refinement ------------------------------------------------------------------------

#: the memory shares the learner tries
_SHARES = tuple(i / 20.0 for i in range(21))


@dataclass
class CurveLearner:
    """A job's work curve, refined from what is measured while it runs.

    The prior is the board's ``mixed`` load at full duty. Each measurement (the cap in force,
    the mean power and the mean work rate over a period) is explained by a load between the
    catalog's compute- and memory-bound ones (its memory share) that runs a fraction of the
    time (its duty: a bursty job waits on input between bursts, at idle power); the share and
    duty that explain the last ``max_points`` measurements best (least squares on work rate
    relative to the board's top rate and power relative to the cap, the duty solved exactly
    for each share) give the curve.
    """

    board: BoardSpec
    max_points: int = 12
    memory_share: float = 0.5
    duty: float = 1.0
    #: per measurement, per share in _SHARES: (r, q, y_r, y_q), the model's and the measured
    #: work rate and power above idle, scaled
    _rows: List[Tuple[Tuple[float, float, float, float], ...]] = field(
        default_factory=list, repr=False
    )
    _curves: Dict[float, LoadCurve] = field(default_factory=dict, repr=False)

    def _load(self, share: float) -> LoadCurve:
        curve = self._curves.get(share)
        if curve is None:
            curve = self._curves[share] = load_curve(self.board, share)
        return curve

    @property
    def n_observations(self) -> int:
        return len(self._rows)

    def observe(self, cap_w: float, power_w: float, work_per_s: float) -> None:
        """Add one measurement (cap W, mean power W, mean work per second) and refit."""
        if not all(math.isfinite(v) for v in (cap_w, power_w, work_per_s)) or cap_w <= 0:
            return
        top = max(self._load(0.0).points[-1][1], 1e-9)  # work scale
        row = []
        for share in _SHARES:
            load = self._load(share)
            row.append(
                (
                    load.work_per_s(cap_w) / top,
                    (load.power_w(cap_w) - load.idle_w) / cap_w,
                    work_per_s / top,
                    (power_w - load.idle_w) / cap_w,
                )
            )
        self._rows.append(tuple(row))
        del self._rows[: -self.max_points]
        self._fit()

    def _fit(self) -> None:
        best: Optional[Tuple[float, float, float]] = None
        for k, share in enumerate(_SHARES):
            # work = d·r(cap) and power - idle = d·(p(cap) - idle): both linear in the duty
            num = den = 0.0
            for rows in self._rows:
                r, q, y_r, y_q = rows[k]
                num += r * y_r + q * y_q
                den += r * r + q * q
            duty = min(1.0, max(0.05, num / den)) if den > 0 else 1.0
            err = 0.0
            for rows in self._rows:
                r, q, y_r, y_q = rows[k]
                err += (duty * r - y_r) ** 2 + (duty * q - y_q) ** 2
            if best is None or err < best[0] - 1e-12:
                best = (err, share, duty)
        if best is not None:
            _, self.memory_share, self.duty = best

    def curve(self) -> Curve:
        """The (cap W, work per second) curve the measurements so far point to."""
        load = self._load(self.memory_share)
        return tuple((c, self.duty * w) for c, w in load.curve())
