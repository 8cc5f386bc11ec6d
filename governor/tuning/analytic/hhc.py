"""Hybrid hexagonal/classic (HHC) tiled stencils: the thesis's analytic time model.

Space dimension 1 is tiled with hexagons (width t_s1 at the top, t_t time steps high), the
others with classic tiles (t_s2, t_s3) executed as a column per block: prisms (2-D) or slabs
(3-D). Everything here is vectorised: give arrays of tile sizes (they broadcast) and get an
array of times in seconds.

Pitch: the thesis prints 2·t_s1 + t_t as the distance between hexagons of a wavefront; that
undercounts tiles for small hexagons (a model time below the ideal). The hexagon's area,
t_t·(2·t_s1 + t_t − 2)/2, implies the pitch **2·t_s1 + t_t − 2**, which is what this module
uses; with it T_alg ≥ T_ideal holds for every tile (see ``tests/tuning/test_hhc_model.py``).

Choices the thesis leaves open, stated here:
- L is given in s/GB; one word is ``gpu.word_bytes`` (4, single precision).
- 3-D shared memory per tile is 2·(t_s1 + t_t + 1)(t_s2 + t_t + 1)(t_s3 + t_t + 1) words, the
  2-D formula extended by one dimension.
- Registers are not modelled (as in the thesis), so k ranges up to the block and shared
  memory limits only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from governor.errors import InvalidRequestError
from governor.tuning.analytic.catalog import HhcGpu, Stencil

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "HhcCandidates",
    "HhcChoice",
    "HhcSelection",
    "hhc_candidates",
    "hhc_shared_words",
    "hhc_time_s",
    "ideal_time_s",
    "select_hhc",
]


def _ceil_div(a: Any, b: Any) -> np.ndarray:
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    return -(-a // b)


def ideal_time_s(size: Sequence[int], steps: int, c_iter_s: float, n_sm: int, n_v: int) -> float:
    """T_ideal = ΠS·T·C_iter/(n_SM·n_V) in s: every vector unit busy, no overhead."""
    return float(np.prod([float(s) for s in size]) * steps * c_iter_s / (n_sm * n_v))


def hhc_shared_words(dims: int, t_s1: Any, t_t: Any, t_s2: Any = 1, t_s3: Any = 1) -> np.ndarray:
    """Shared memory one tile needs, in words (M_tile)."""
    t_s1, t_t, t_s2, t_s3 = (np.asarray(v, dtype=np.int64) for v in (t_s1, t_t, t_s2, t_s3))
    if dims == 1:
        return 2 * (t_s1 + t_t)
    words = 2 * (t_s1 + t_t + 1) * (t_s2 + t_t + 1)
    return words * (t_s3 + t_t + 1) if dims == 3 else words


def hhc_time_s(
    gpu: HhcGpu,
    c_iter_s: float,
    size: Sequence[int],
    steps: int,
    t_s1: Any,
    t_t: Any,
    t_s2: Any = 1,
    t_s3: Any = 1,
    k: Any = 1,
    clock_scale: float = 1.0,
) -> np.ndarray:
    """Modelled run time T_alg in s of each tile choice (arrays broadcast together).

    ``size`` has 1, 2 or 3 entries (S1[, S2[, S3]]); ``k`` is thread blocks per SM;
    ``clock_scale`` = reference clock / core clock multiplies C_iter and τ_sync (core-clock
    work), leaving memory and host synchronisation unchanged.
    """
    dims = len(size)
    if dims not in (1, 2, 3):
        raise InvalidRequestError("HHC stencils have 1, 2 or 3 space dimensions")
    t_s1, t_t, t_s2, t_s3, k = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.int64) for v in (t_s1, t_t, t_s2, t_s3, k))
    )
    if dims < 3:
        t_s3 = np.ones_like(t_s3)
    if dims < 2:
        t_s2 = np.ones_like(t_s2)
    c_it = c_iter_s * clock_scale
    tau = gpu.tau_sync_s * clock_scale
    ell = gpu.l_s_per_word
    q = t_s2 * t_s3  # classic-tile cross-section carried by one hexagon row
    n_w = 2 * _ceil_div(steps, t_t)  # wavefronts
    pitch = 2 * t_s1 + t_t - 2
    w = _ceil_div(size[0], pitch)  # tiles per wavefront
    m_prime = 2.0 * q * (t_s1 + 2 * t_t) * ell + 2.0 * tau
    # c = 2·C_iter·Σ_{x = t_s1, step 2}^{t_s1 + t_t − 2} ⌈x·q/n_V⌉ + t_t·τ_sync
    rows = np.zeros(t_s1.shape, dtype=np.int64)
    half = t_t // 2
    for j in range(int(half.max()) if half.size else 0):
        rows += np.where(j < half, _ceil_div((t_s1 + 2 * j) * q, gpu.n_v), 0)
    c = 2.0 * c_it * rows + t_t * tau
    big = np.maximum(m_prime, c)
    if dims == 1:
        per_block = m_prime + c + (k - 1) * big
    else:
        n_col = _ceil_div(size[1] + t_t, t_s2)
        if dims == 3:
            # ⌈(S2 + t_t)/t_s2 · (S3 + t_t)/t_s3⌉, computed exactly in integers
            n_col = _ceil_div((size[1] + t_t) * (size[2] + t_t), t_s2 * t_s3)
        per_block = np.where(k == 1, (m_prime + c) * n_col, m_prime + k * big * n_col)
    rounds = _ceil_div(_ceil_div(w, k), gpu.n_sm)
    return n_w * per_block * rounds + n_w * gpu.t_sync_s


@dataclass(frozen=True)
class HhcCandidates:
    """The valid points of the search grid, one array entry per candidate."""

    dims: int
    t_s1: np.ndarray
    t_t: np.ndarray
    t_s2: np.ndarray
    t_s3: np.ndarray
    k: np.ndarray

    def __len__(self) -> int:
        return int(self.t_s1.size)

    def tiles(self, i: int) -> Dict[str, int]:
        out = {"t_s1": int(self.t_s1[i])}
        if self.dims >= 2:
            out["t_s2"] = int(self.t_s2[i])
        if self.dims == 3:
            out["t_s3"] = int(self.t_s3[i])
        out["t_t"] = int(self.t_t[i])
        return out


def _default_axes(dims: int) -> Dict[str, ArrayLike]:
    if dims == 1:
        return {"t_s1": np.arange(1, 257), "t_t": np.arange(2, 65, 2), "t_s2": [1], "t_s3": [1]}
    if dims == 2:
        return {
            "t_s1": np.arange(1, 65),
            "t_t": np.arange(2, 33, 2),
            "t_s2": np.arange(32, 257, 32),
            "t_s3": [1],
        }
    return {
        "t_s1": np.arange(1, 33),
        "t_t": np.arange(2, 17, 2),
        "t_s2": np.array([32, 64]),
        "t_s3": np.arange(1, 33),
    }


def hhc_candidates(
    gpu: HhcGpu, dims: int, axes: Optional[Dict[str, Sequence[int]]] = None
) -> HhcCandidates:
    """Every tile choice and k (blocks per SM) on the grid that satisfies the constraints.

    Constraints: M_tile ≤ shared memory per block; k ≤ MTB_SM; k·M_tile ≤ M_SM; t_t even and
    ≥ 2; t_s2 a multiple of 32 (2-D, 3-D). ``axes`` overrides the default grid per name.
    """
    if dims not in (1, 2, 3):
        raise InvalidRequestError("HHC stencils have 1, 2 or 3 space dimensions")
    grid = _default_axes(dims)
    for name, values in (axes or {}).items():
        if name not in grid:
            raise InvalidRequestError(f"unknown HHC axis {name!r}")
        grid[name] = np.asarray(values, dtype=np.int64)
    s1, tt, s2, s3 = np.meshgrid(
        *(np.asarray(grid[n], dtype=np.int64) for n in ("t_s1", "t_t", "t_s2", "t_s3")),
        indexing="ij",
    )
    s1, tt, s2, s3 = s1.ravel(), tt.ravel(), s2.ravel(), s3.ravel()
    words = hhc_shared_words(dims, s1, tt, s2, s3)
    ok = (s1 >= 1) & (tt >= 2) & (tt % 2 == 0) & (s2 >= 1) & (s3 >= 1)
    ok &= words * gpu.word_bytes <= gpu.shared_per_block_bytes
    if dims >= 2:
        ok &= s2 % 32 == 0
    s1, tt, s2, s3, words = s1[ok], tt[ok], s2[ok], s3[ok], words[ok]
    k_max = np.minimum(gpu.max_blocks_per_sm, gpu.shared_per_sm_bytes // (words * gpu.word_bytes))
    reps = np.maximum(k_max, 0)
    idx = np.repeat(np.arange(s1.size), reps)
    # k = 1..k_max for each tile: position within its run of repeats
    starts = np.repeat(np.cumsum(reps) - reps, reps)
    k = np.arange(idx.size) - starts + 1
    return HhcCandidates(dims, s1[idx], tt[idx], s2[idx], s3[idx], k.astype(np.int64))


@dataclass(frozen=True)
class HhcChoice:
    """One shortlisted tile choice."""

    tiles: Dict[str, int]
    blocks_per_sm: int
    time_s: float
    clock_mhz: Optional[float] = None
    energy_j: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "tiles": dict(self.tiles),
            "blocks_per_sm": self.blocks_per_sm,
            "time_s": self.time_s,
        }
        if self.clock_mhz is not None:
            out["clock_mhz"] = self.clock_mhz
        if self.energy_j is not None:
            out["energy_j"] = self.energy_j
        return out

    @classmethod
    def from_dict(cls, doc: Dict[str, Any]) -> HhcChoice:
        return cls(
            tiles={str(k): int(v) for k, v in doc["tiles"].items()},
            blocks_per_sm=int(doc["blocks_per_sm"]),
            time_s=float(doc["time_s"]),
            clock_mhz=doc.get("clock_mhz"),
            energy_j=doc.get("energy_j"),
        )


@dataclass(frozen=True)
class HhcSelection:
    """The result of a selection: the ideal time, the best choice and the shortlist."""

    stencil: str
    gpu: str
    size: Tuple[int, ...]
    steps: int
    objective: str
    within: float
    ideal_time_s: float
    best: HhcChoice
    shortlist: List[HhcChoice] = field(default_factory=list)
    points_evaluated: int = 0
    pitch: str = "2*t_s1 + t_t - 2"

    def to_dict(self) -> Dict[str, Any]:
        return {
            "model": "hhc",
            "stencil": self.stencil,
            "gpu": self.gpu,
            "size": list(self.size),
            "steps": self.steps,
            "objective": self.objective,
            "within": self.within,
            "ideal_time_s": self.ideal_time_s,
            "best": self.best.to_dict(),
            "shortlist": [c.to_dict() for c in self.shortlist],
            "points_evaluated": self.points_evaluated,
            "pitch": self.pitch,
        }

    @classmethod
    def from_dict(cls, doc: Dict[str, Any]) -> HhcSelection:
        return cls(
            stencil=doc["stencil"],
            gpu=doc["gpu"],
            size=tuple(int(s) for s in doc["size"]),
            steps=int(doc["steps"]),
            objective=doc["objective"],
            within=float(doc["within"]),
            ideal_time_s=float(doc["ideal_time_s"]),
            best=HhcChoice.from_dict(doc["best"]),
            shortlist=[HhcChoice.from_dict(c) for c in doc["shortlist"]],
            points_evaluated=int(doc.get("points_evaluated", 0)),
        )


def _check_problem(stencil: Stencil, size: Sequence[int], steps: int, within: float) -> None:
    if len(size) != stencil.dims:
        raise InvalidRequestError(
            f"{stencil.name} is {stencil.dims}-D: give {stencil.dims} sizes, got {len(size)}"
        )
    if any(int(s) < 1 for s in size) or int(steps) < 1:
        raise InvalidRequestError("sizes and steps must be positive integers")
    if not (0 <= within < 10):
        raise InvalidRequestError(f"within must be a fraction in [0, 10), got {within}")


def select_hhc(
    stencil: Stencil,
    gpu: HhcGpu,
    size: Sequence[int],
    steps: int,
    within: float = 0.10,
    objective: str = "time",
    power_model: Any = None,
    c_iter_s: Optional[float] = None,
    axes: Optional[Dict[str, Sequence[int]]] = None,
) -> HhcSelection:
    """Shortlist the tiles within ``within`` of the modelled minimum (the thesis's selection).

    ``objective="energy"`` needs ``power_model`` (a :class:`~.energy.PowerModel` or any object
    with ``power_w(clock_mhz)`` and ``supported_clocks_mhz``): every candidate is evaluated at
    every clock and ranked by P(f)·T_alg(f).

    Raises:
        InvalidRequestError: bad sizes, objective, or an energy objective without power model.
    """
    size = tuple(int(s) for s in size)
    _check_problem(stencil, size, steps, within)
    if c_iter_s is None:
        if stencil.name not in gpu.c_iter_s:
            raise InvalidRequestError(f"no C_iter for {stencil.name} on {gpu.name}")
        c_iter_s = gpu.c_iter_s[stencil.name]
    cands = hhc_candidates(gpu, stencil.dims, axes)
    if len(cands) == 0:
        raise InvalidRequestError("no tile choice satisfies the constraints")
    ideal = ideal_time_s(size, steps, c_iter_s, gpu.n_sm, gpu.n_v)

    def times(scale: float) -> np.ndarray:
        return hhc_time_s(
            gpu, c_iter_s, size, steps, cands.t_s1, cands.t_t, cands.t_s2, cands.t_s3,
            cands.k, clock_scale=scale,
        )  # fmt: skip

    if objective == "time":
        t = times(1.0)
        score = t
        order = np.argsort(score, kind="stable")
        keep = order[score[order] <= score[order[0]] * (1.0 + within)]
        choices = [HhcChoice(cands.tiles(i), int(cands.k[i]), float(t[i])) for i in keep]
    elif objective == "energy":
        if power_model is None:
            raise InvalidRequestError(
                "the energy objective needs a power model: pass a board with a calibrated "
                "profile (run `governor calibrate` first) or a PowerModel"
            )
        clocks = np.asarray(power_model.supported_clocks_mhz, dtype=float)
        if clocks.size == 0:
            raise InvalidRequestError("the power model lists no supported clocks")
        t = np.stack([times(gpu.reference_clock_mhz / f) for f in clocks], axis=1)
        e = t * np.asarray(power_model.power_w(clocks), dtype=float)[None, :]
        flat = e.ravel()
        order = np.argsort(flat, kind="stable")
        keep = order[flat[order] <= flat[order[0]] * (1.0 + within)]
        n_clk = clocks.size
        choices = [
            HhcChoice(
                cands.tiles(i // n_clk),
                int(cands.k[i // n_clk]),
                float(t.ravel()[i]),
                clock_mhz=float(clocks[i % n_clk]),
                energy_j=float(flat[i]),
            )
            for i in keep
        ]
    else:
        raise InvalidRequestError(f"objective must be 'time' or 'energy', not {objective!r}")
    return HhcSelection(
        stencil=stencil.name,
        gpu=gpu.name,
        size=size,
        steps=int(steps),
        objective=objective,
        within=float(within),
        ideal_time_s=ideal,
        best=choices[0],
        shortlist=choices,
        points_evaluated=len(cands) * (1 if objective == "time" else int(clocks.size)),
    )
