"""Tiled DOACROSS loops (skewed SOR nests): Di & Xue's analytic time model and tile search.

An n-deep SOR nest (time outermost, then n−1 space loops) is skewed (every space index shifted
by the time step, which makes all dependences non-negative) and tiled with m_0 × … × m_{n−1}
tiles. Inter-tile wavefronts (tiles whose indices sum to t1) run one after another; the tiles
of one wavefront are spread over gridDim.x = B·P blocks. Inside a tile, intra-tile wavefronts
(points whose in-tile coordinates sum to e1) run one after another with a barrier between them.

    T_TILE  = α·Σ G_e1 + (U_e1 − L_e1 + 3)·σ_thd + β·L_TILE + γ·N_mem
    T_t1    = Σ_rounds T^i + σ_blk,   T^i = B·T_TILE (full round), ⌈(N mod BP)/P⌉·T_TILE (last)
    T_total = Σ_t1 T_t1 + σ_ker

Choices the paper leaves to the implementer, stated here:
- the block is one-dimensional, ``threads`` a multiple of the warp size; G_e1 = ⌈H_e1/32⌉
  warps (the iterations of a wavefront are dealt densely to threads); the thread organisation
  enters through α, β, γ and σ_thd, which are fitted **per thread count** (as the paper fits
  them per organisation), and through occupancy B;
- N_mem = 2·Σ_k Π_{j≠k} m_j (each face of the tile loaded once and stored once);
- shared memory per tile: Π_{k≥1}(m_k + 2) words (the spatial block with a one-point halo);
- border tiles (partial tiles on the edges of the skewed domain) cost 0.5·T_TILE; a wavefront
  with N tiles of which F are full costs ⌈N/P⌉·(F + 0.5·(N − F))/N tile times, using the
  identity Σ_rounds T^i = ⌈N/P⌉·T_TILE (see :func:`rounds_time_s`);
- occupancy B = min(MTB_SM, shared, threads and register limits; registers per thread fixed).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from governor.errors import InvalidRequestError
from governor.tuning.analytic.catalog import DoacrossGpu, Nest

__all__ = [
    "DoacrossConstants",
    "DoacrossLayouts",
    "DoacrossResult",
    "ThreadOrg",
    "default_constants",
    "doacross_search",
    "enumerate_layouts",
    "occupancy_blocks",
    "rounds_time_s",
    "tile_features",
    "tile_time_s",
    "total_time_s",
    "wavefront_profile",
]


@dataclass(frozen=True)
class ThreadOrg:
    """Constants of one thread organisation (block of ``threads`` threads), all in seconds."""

    alpha_s: float  # per warp of an intra-tile wavefront
    beta_s: float  # per iteration of the tile
    gamma_s: float  # per global load or store
    sigma_thd_s: float  # one in-block barrier


@dataclass(frozen=True)
class DoacrossConstants:
    """The six constants of the model: α, β, γ, σ_thd per thread count, σ_blk per gridDim.x,
    σ_ker. ``source`` says where they came from ("illustrative", "calibrated", ...)."""

    per_threads: Dict[int, ThreadOrg]
    sigma_blk_s: Dict[int, float]
    sigma_ker_s: float
    source: str = "illustrative"

    def __post_init__(self) -> None:
        if not self.per_threads or not self.sigma_blk_s:
            raise InvalidRequestError("DOACROSS constants need thread and grid tables")
        values = [self.sigma_ker_s, *self.sigma_blk_s.values()]
        for org in self.per_threads.values():
            values.extend(asdict(org).values())
        if any((not np.isfinite(v)) or v < 0 for v in values):
            raise InvalidRequestError("DOACROSS constants must be finite and >= 0")

    @property
    def thread_counts(self) -> Tuple[int, ...]:
        return tuple(sorted(int(t) for t in self.per_threads))

    def sigma_blk_at(self, grid: Any) -> np.ndarray:
        """σ_blk in s for gridDim.x ``grid``, linearly interpolated (extrapolated) in the table."""
        xs = np.array(sorted(self.sigma_blk_s), dtype=float)
        ys = np.array([self.sigma_blk_s[int(x)] for x in xs], dtype=float)
        g = np.asarray(grid, dtype=float)
        if xs.size == 1:
            return np.full(g.shape, ys[0])
        out = np.interp(g, xs, ys)
        hi = g > xs[-1]
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
        return np.where(hi, ys[-1] + slope * (g - xs[-1]), out)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "per_threads": {str(t): asdict(o) for t, o in sorted(self.per_threads.items())},
            "sigma_blk_s": {str(g): v for g, v in sorted(self.sigma_blk_s.items())},
            "sigma_ker_s": self.sigma_ker_s,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> DoacrossConstants:
        try:
            return cls(
                per_threads={
                    int(t): ThreadOrg(**{k: float(v) for k, v in o.items()})
                    for t, o in doc["per_threads"].items()
                },
                sigma_blk_s={int(g): float(v) for g, v in doc["sigma_blk_s"].items()},
                sigma_ker_s=float(doc["sigma_ker_s"]),
                source=str(doc.get("source", "profile")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise InvalidRequestError(f"bad DOACROSS constants: {err}") from err


def default_constants(gpu: DoacrossGpu) -> DoacrossConstants:
    """Illustrative constants (not from the paper, which publishes none) for ``gpu``.

    Shaped like a GT200-class GPU: small blocks hide latency badly (α falls with threads),
    barriers cost more in bigger blocks, the inter-block sync grows with the grid.
    """
    orgs = {}
    for threads in range(gpu.warp_size, gpu.max_threads_per_block + 1, gpu.warp_size):
        warps = threads / gpu.warp_size
        orgs[threads] = ThreadOrg(
            alpha_s=2.0e-8 * (1.0 + 6.0 / warps),
            beta_s=4.0e-10,
            gamma_s=1.5e-9 * (1.0 + 2.0 / warps),
            sigma_thd_s=4.0e-8 + 4.0e-9 * warps,
        )
    grids = [gpu.n_sm * b for b in range(1, gpu.max_blocks_per_sm + 1)]
    blk = {g: 3.0e-6 + 1.0e-8 * g for g in grids}
    return DoacrossConstants(orgs, blk, sigma_ker_s=5.0e-6, source="illustrative")


# ---------------------------------------------------------------------------------------------
# per-tile quantities


def _box_profile(m: np.ndarray) -> np.ndarray:
    """H_e for each tile (rows of ``m``): points of the box with coordinate sum e."""
    b, n = m.shape
    length = int((m - 1).sum(axis=1).max()) + 1 + n
    rows = np.zeros((b, length), dtype=np.int64)
    for subset in itertools.product((0, 1), repeat=n):
        sign = -1 if sum(subset) % 2 else 1
        pos = (m * np.array(subset, dtype=np.int64)).sum(axis=1)
        np.add.at(rows, (np.arange(b), pos), sign)
    for _ in range(n):
        rows = np.cumsum(rows, axis=1)
    return rows


def _sum_ceil32(n: np.ndarray, warp: int) -> np.ndarray:
    """Σ_{h=1}^{n} ⌈h/warp⌉ in closed form."""
    q, r = np.divmod(n, warp)
    return warp * q * (q + 1) // 2 + r * (q + 1)


def tile_features(m: Any, warp: int = 32) -> Dict[str, np.ndarray]:
    """Per-tile model inputs for tile sizes ``m`` (shape (tiles, depth)).

    Returns ``sum_warps`` (Σ_e G_e), ``wavefronts`` (U − L + 1), ``iterations`` (L_TILE),
    ``mem_words`` (N_mem), ``max_width`` (widest intra-tile wavefront), ``shared_words``.
    """
    m = np.atleast_2d(np.asarray(m, dtype=np.int64))
    n = m.shape[1]
    iters = np.prod(m, axis=1)
    faces = sum(np.prod(np.delete(m, k, axis=1), axis=1) for k in range(n))
    shared = np.prod(m[:, 1:] + 2, axis=1)
    if n == 2:
        a, b = m.min(axis=1), m.max(axis=1)
        sum_warps = 2 * _sum_ceil32(a - 1, warp) + (b - a + 1) * (-(-a // warp))
        width = a
    else:
        sum_warps = np.empty(m.shape[0], dtype=np.int64)
        width = np.empty(m.shape[0], dtype=np.int64)
        step = max(1, int(4_000_000 // max(1, int((m - 1).sum(axis=1).max()) + n + 1)))
        for s in range(0, m.shape[0], step):
            prof = _box_profile(m[s : s + step])
            sum_warps[s : s + step] = (-(-prof // warp)).sum(axis=1)
            width[s : s + step] = prof.max(axis=1)
    return {
        "sum_warps": sum_warps,
        "wavefronts": (m - 1).sum(axis=1) + 1,
        "iterations": iters,
        "mem_words": 2 * faces,
        "max_width": width,
        "shared_words": shared,
    }


def wavefront_profile(m: Any, size: Sequence[int], steps: int) -> Tuple[np.ndarray, np.ndarray]:
    """Tiles per inter-tile wavefront of the skewed domain, all and full ones.

    ``m`` is (tiles, depth) with the time tile first; ``size`` the space extents. Returns two
    (tiles, wavefronts) integer arrays: every non-empty tile, and the full (interior) tiles.
    """
    m = np.atleast_2d(np.asarray(m, dtype=np.int64))
    b, n = m.shape
    d = n - 1
    if len(size) != d:
        raise InvalidRequestError(f"a {n}-deep nest has {d} space sizes, got {len(size)}")
    n0 = -(-steps // m[:, 0])
    a = np.arange(int(n0.max()))[None, :]
    valid = a < n0[:, None]
    t_lo = a * m[:, :1]
    t_hi = np.minimum(t_lo + m[:, :1], steps) - 1
    row_full = (t_lo + m[:, :1]) <= steps
    lo, cnt, flo, fcnt = [], [], [], []
    for k in range(d):
        mk = m[:, k + 1 : k + 2]
        lo_k = t_lo // mk
        hi_k = (t_hi + size[k] - 1) // mk
        lo.append(lo_k)
        cnt.append(hi_k - lo_k + 1)
        flo_k = -(-t_hi // mk)
        fhi_k = (t_lo + size[k]) // mk - 1
        flo.append(flo_k)
        fcnt.append(np.where(row_full, np.maximum(fhi_k - flo_k + 1, 0), 0))
    base = a + sum(lo)
    fbase = a + sum(flo)
    length = int(np.where(valid, base + sum(cnt), 0).max()) + 2

    def histogram(start: np.ndarray, counts: List[np.ndarray]) -> np.ndarray:
        flat = np.zeros(b * length, dtype=np.int64)
        offset = (np.arange(b) * length)[:, None]
        for subset in itertools.product((0, 1), repeat=d):
            sign = -1 if sum(subset) % 2 else 1
            pos = start + sum(c for c, s in zip(counts, subset) if s)
            ok = valid & (pos < length)
            flat += (
                np.bincount((offset + np.minimum(pos, length - 1))[ok], minlength=b * length) * sign
            )
        out = flat.reshape(b, length)
        for _ in range(d):
            out = np.cumsum(out, axis=1)
        return out

    return histogram(base, cnt), histogram(fbase, fcnt)


def rounds_time_s(n_tiles: Any, blocks_per_sm: Any, n_sm: int, tile_time_s: Any) -> np.ndarray:
    """Σ over rounds of one wavefront, literally: full rounds cost B·T_TILE, the last
    ⌈(N mod B·P)/P⌉·T_TILE. Equals ⌈N/P⌉·T_TILE, which the search uses."""
    n = np.asarray(n_tiles, dtype=np.int64)
    bp = np.asarray(blocks_per_sm, dtype=np.int64) * n_sm
    full, rest = np.divmod(n, bp)
    return (full * np.asarray(blocks_per_sm) + (-(-rest // n_sm))) * np.asarray(tile_time_s)


def occupancy_blocks(gpu: DoacrossGpu, threads: Any, shared_words: Any) -> np.ndarray:
    """Blocks per SM (B) for blocks of ``threads`` using ``shared_words`` of shared memory."""
    threads = np.asarray(threads, dtype=np.int64)
    shared_b = np.maximum(np.asarray(shared_words, dtype=np.int64) * gpu.word_bytes, 1)
    threads, shared_b = np.broadcast_arrays(threads, shared_b)
    out = np.minimum(gpu.shared_per_sm_bytes // shared_b, gpu.max_threads_per_sm // threads)
    out = np.minimum(out, gpu.regs_per_sm // (threads * gpu.regs_per_thread))
    return np.minimum(out, gpu.max_blocks_per_sm)


def _org_arrays(constants: DoacrossConstants, threads: np.ndarray) -> Dict[str, np.ndarray]:
    table = constants.per_threads
    out = {}
    for name in ("alpha_s", "beta_s", "gamma_s", "sigma_thd_s"):
        lut = {t: getattr(o, name) for t, o in table.items()}
        out[name] = np.array([lut[int(t)] for t in np.asarray(threads).ravel()]).reshape(
            np.shape(threads)
        )
    return out


def tile_time_s(
    constants: DoacrossConstants, features: Mapping[str, np.ndarray], threads: Any
) -> np.ndarray:
    """T_TILE in s for tiles described by ``features`` run by blocks of ``threads``."""
    org = _org_arrays(constants, np.asarray(threads))
    return (
        org["alpha_s"] * features["sum_warps"]
        + (features["wavefronts"] + 2) * org["sigma_thd_s"]
        + org["beta_s"] * features["iterations"]
        + org["gamma_s"] * features["mem_words"]
    )


def total_time_s(
    constants: DoacrossConstants,
    gpu: DoacrossGpu,
    m: Any,
    size: Sequence[int],
    steps: int,
    threads: Any,
) -> np.ndarray:
    """T_total in s for each (tile, threads) pair (``m`` rows and ``threads`` broadcast)."""
    m = np.atleast_2d(np.asarray(m, dtype=np.int64))
    threads = np.broadcast_to(np.asarray(threads, dtype=np.int64), (m.shape[0],))
    feats = tile_features(m, gpu.warp_size)
    load, n_wf = _inter_tile(m, size, steps, gpu.n_sm)
    blocks = occupancy_blocks(gpu, threads, feats["shared_words"])
    t_tile = tile_time_s(constants, feats, threads)
    grid = blocks * gpu.n_sm
    return t_tile * load + n_wf * constants.sigma_blk_at(grid) + constants.sigma_ker_s


def _inter_tile(
    m: np.ndarray, size: Sequence[int], steps: int, n_sm: int
) -> Tuple[np.ndarray, np.ndarray]:
    """Per tile size: Σ_t1 ⌈N/P⌉·(F + 0.5(N − F))/N (in tile times) and the wavefront count."""
    load = np.empty(m.shape[0])
    n_wf = np.empty(m.shape[0], dtype=np.int64)
    # batch so that one (batch, wavefronts) array stays a few MB
    span = (steps + max(size)) // m.min(axis=1) + 3
    order = np.argsort(span, kind="stable")
    i = 0
    while i < order.size:
        width = int(span[order[min(i + 1, order.size - 1)]])
        step = max(1, 2_000_000 // max(width * (1 << (m.shape[1] - 1)), 1))
        idx = order[i : i + step]
        every, full = wavefront_profile(m[idx], size, steps)
        eff = full + 0.5 * (every - full)
        with np.errstate(invalid="ignore", divide="ignore"):
            per = np.where(every > 0, -(-every // n_sm) * eff / np.maximum(every, 1), 0.0)
        load[idx] = per.sum(axis=1)
        n_wf[idx] = (every > 0).sum(axis=1)
        i += step
    return load, n_wf


# ---------------------------------------------------------------------------------------------
# layouts and search

# per-dimension tile caps: 1-D SOR ~3e6 layouts at 1536 (the paper searched 3e6)
_CAPS = {2: 1536, 3: 64, 4: 32}


@dataclass(frozen=True)
class DoacrossLayouts:
    """Tile sizes that pass the reuse and shared-memory filters, with their features."""

    tiles: np.ndarray  # (tiles, depth)
    features: Dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.tiles.shape[0])


def enumerate_layouts(
    nest: Nest,
    gpu: DoacrossGpu,
    size: Sequence[int],
    steps: int,
    caps: Optional[Sequence[int]] = None,
    reuse_threshold: Optional[float] = None,
) -> DoacrossLayouts:
    """Every tile size m (1 ≤ m_k ≤ min(extent, cap)) with reuse L_TILE/N_mem above the nest's
    threshold whose shared memory fits one block."""
    depth = nest.depth
    if len(size) != depth - 1:
        raise InvalidRequestError(f"{nest.name} needs {depth - 1} space sizes, got {len(size)}")
    threshold = nest.reuse_threshold if reuse_threshold is None else float(reuse_threshold)
    extents = [int(steps), *(int(s) for s in size)]
    caps = list(caps) if caps is not None else [_CAPS[depth]] * depth
    axes = [np.arange(1, min(e, c) + 1, dtype=np.int64) for e, c in zip(extents, caps)]
    rest = np.stack([g.ravel() for g in np.meshgrid(*axes[1:], indexing="ij")], axis=1)
    max_shared = min(gpu.shared_per_sm_bytes, 48 * 1024) // gpu.word_bytes
    rest = rest[np.prod(rest + 2, axis=1) <= max_shared]
    chunks = []
    prod_rest = np.prod(rest, axis=1)
    # faces: Σ_k Π_{j≠k} m_j = Π_rest + m0·Σ_{k≥1} Π_{j≠k, j≥1} m_j
    side = sum(np.prod(np.delete(rest, k, axis=1), axis=1) for k in range(rest.shape[1]))
    for m0 in axes[0]:
        reuse = m0 * prod_rest / (2.0 * (prod_rest + m0 * side))
        keep = reuse >= threshold
        if keep.any():
            sel = rest[keep]
            chunks.append(np.column_stack([np.full(sel.shape[0], m0), sel]))
    if not chunks:
        return DoacrossLayouts(np.zeros((0, depth), dtype=np.int64), {})
    tiles = np.concatenate(chunks)
    return DoacrossLayouts(tiles, tile_features(tiles, gpu.warp_size))


@dataclass(frozen=True)
class DoacrossResult:
    """The argmin layout and how much was searched."""

    nest: str
    gpu: str
    size: Tuple[int, ...]
    steps: int
    tiles: Dict[str, int]
    threads: int
    blocks_per_sm: int
    grid: int
    time_s: float
    layouts_searched: int
    search_s: float
    constants_source: str
    objective: str = "time"
    clock_mhz: Optional[float] = None
    energy_j: Optional[float] = None
    runners_up: List[Dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        best: Dict[str, Any] = {
            "tiles": dict(self.tiles),
            "block": [self.threads],
            "grid": self.grid,
            "blocks_per_sm": self.blocks_per_sm,
            "time_s": self.time_s,
        }
        if self.clock_mhz is not None:
            best["clock_mhz"] = self.clock_mhz
        if self.energy_j is not None:
            best["energy_j"] = self.energy_j
        return {
            "model": "doacross",
            "nest": self.nest,
            "gpu": self.gpu,
            "size": list(self.size),
            "steps": self.steps,
            "objective": self.objective,
            "best": best,
            "layouts_searched": self.layouts_searched,
            "search_s": self.search_s,
            "constants_source": self.constants_source,
            "runners_up": list(self.runners_up),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> DoacrossResult:
        best = doc["best"]
        return cls(
            nest=doc["nest"],
            gpu=doc["gpu"],
            size=tuple(int(s) for s in doc["size"]),
            steps=int(doc["steps"]),
            tiles={k: int(v) for k, v in best["tiles"].items()},
            threads=int(best["block"][0]),
            blocks_per_sm=int(best["blocks_per_sm"]),
            grid=int(best["grid"]),
            time_s=float(best["time_s"]),
            layouts_searched=int(doc["layouts_searched"]),
            search_s=float(doc["search_s"]),
            constants_source=str(doc.get("constants_source", "")),
            objective=str(doc.get("objective", "time")),
            clock_mhz=best.get("clock_mhz"),
            energy_j=best.get("energy_j"),
            runners_up=list(doc.get("runners_up", [])),
        )


def _tile_names(depth: int) -> List[str]:
    return ["m_t"] + [f"m_s{k}" for k in range(1, depth)]


def doacross_search(
    nest: Nest,
    gpu: DoacrossGpu,
    size: Sequence[int],
    steps: int,
    constants: Optional[DoacrossConstants] = None,
    objective: str = "time",
    power_model: Any = None,
    reference_clock_mhz: float = 1300.0,
    caps: Optional[Sequence[int]] = None,
    reuse_threshold: Optional[float] = None,
    top: int = 5,
) -> DoacrossResult:
    """Search every layout (tile size × threads) and return the smallest T_total (or energy).

    Energy: each layout at each clock of ``power_model`` costs P(f)·T(f), with the core-clock
    terms (everything but σ_ker and σ_blk, which are host/launch bound) scaled by
    ``reference_clock_mhz``/f.

    Raises:
        InvalidRequestError: bad sizes, objective, no valid layout, or energy without power model.
    """
    size = tuple(int(s) for s in size)
    if any(s < 1 for s in size) or int(steps) < 1:
        raise InvalidRequestError("sizes and steps must be positive integers")
    if objective not in ("time", "energy"):
        raise InvalidRequestError(f"objective must be 'time' or 'energy', not {objective!r}")
    if objective == "energy" and power_model is None:
        raise InvalidRequestError(
            "the energy objective needs a power model: pass a board with a calibrated "
            "profile (run `governor calibrate` first) or a PowerModel"
        )
    constants = constants or default_constants(gpu)
    start = time.perf_counter()
    lay = enumerate_layouts(nest, gpu, size, steps, caps, reuse_threshold)
    if len(lay) == 0:
        raise InvalidRequestError(
            f"no tile size of {nest.name} reaches reuse {nest.reuse_threshold:g} within "
            f"the problem size and shared memory"
        )
    load, n_wf = _inter_tile(lay.tiles, size, steps, gpu.n_sm)
    thr = np.array(constants.thread_counts, dtype=np.int64)
    thr = thr[thr <= gpu.max_threads_per_block]
    feats = lay.features
    # layouts: tile i × thread count j where every thread has work (threads ≤ widest wavefront)
    ok = thr[None, :] <= feats["max_width"][:, None]
    blocks = occupancy_blocks(gpu, thr[None, :], feats["shared_words"][:, None])
    ok &= blocks >= 1
    ti, tj = np.nonzero(ok)
    if ti.size == 0:
        raise InvalidRequestError("no layout gives every thread work within the GPU limits")
    org = _org_arrays(constants, thr)
    core = (
        org["alpha_s"][tj] * feats["sum_warps"][ti]
        + (feats["wavefronts"][ti] + 2) * org["sigma_thd_s"][tj]
        + org["beta_s"][tj] * feats["iterations"][ti]
        + org["gamma_s"][tj] * feats["mem_words"][ti]
    ) * load[ti]
    b = blocks[ti, tj]
    fixed = n_wf[ti] * constants.sigma_blk_at(b * gpu.n_sm) + constants.sigma_ker_s
    clock = energy = None
    if objective == "time":
        t = core + fixed
        score = t
    else:
        clocks = np.asarray(power_model.supported_clocks_mhz, dtype=float)
        if clocks.size == 0:
            raise InvalidRequestError("the power model lists no supported clocks")
        power = np.asarray(power_model.power_w(clocks), dtype=float)
        best_e = np.full(core.shape, np.inf)
        best_f = np.zeros(core.shape)
        for f, p in zip(clocks, power):
            e_f = (core * (reference_clock_mhz / f) + fixed) * p
            better = e_f < best_e
            best_e = np.where(better, e_f, best_e)
            best_f = np.where(better, f, best_f)
        score = best_e
        t = core * (reference_clock_mhz / np.maximum(best_f, 1e-9)) + fixed
    order = np.argsort(score, kind="stable")[: max(1, top)]
    i = int(order[0])
    if objective == "energy":
        clock, energy = float(best_f[i]), float(score[i])
    names = _tile_names(nest.depth)

    def describe(j: int) -> Dict[str, Any]:
        return {
            "tiles": {n: int(v) for n, v in zip(names, lay.tiles[ti[j]])},
            "block": [int(thr[tj[j]])],
            "time_s": float(t[j]),
        }

    elapsed = time.perf_counter() - start
    return DoacrossResult(
        nest=nest.name,
        gpu=gpu.name,
        size=size,
        steps=int(steps),
        tiles={n: int(v) for n, v in zip(names, lay.tiles[ti[i]])},
        threads=int(thr[tj[i]]),
        blocks_per_sm=int(b[i]),
        grid=int(b[i]) * gpu.n_sm,
        time_s=float(t[i]),
        layouts_searched=int(ti.size),
        search_s=elapsed,
        constants_source=constants.source,
        objective=objective,
        clock_mhz=clock,
        energy_j=energy,
        runners_up=[describe(int(j)) for j in order[1:]],
    )
