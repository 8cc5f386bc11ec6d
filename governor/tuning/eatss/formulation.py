"""The EATSS formulation (docs: ../shared/specs/eatss.md) turned into an integer program.

:func:`build_problem` scales the GPU figures to loop-iteration units, derives stride scores,
the coalescing loop, the shared-memory and cache references, the weights and the capacity
constraints, and returns a :class:`Problem` (or an :class:`Infeasible` with the reason).
Everything here is exact integer/rational arithmetic; nothing is solved yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Dict, List, Optional, Sequence, Tuple, Union

from governor.errors import InvalidRequestError
from governor.tuning.eatss.gpus import GpuResources
from governor.tuning.eatss.model import Kernel

__all__ = [
    "BOUNDS",
    "PRECISIONS",
    "Constraint",
    "Infeasible",
    "Problem",
    "build_problem",
]

PRECISIONS = ("single", "double")
BOUNDS = ("paper", "artifact")

# A monomial is (coefficient, loop indices whose tile sizes are multiplied).
Monomial = Tuple[int, Tuple[int, ...]]


@dataclass(frozen=True)
class Constraint:
    """``sum(coef * prod(T[d] for d in loops)) <= capacity`` over the monomials."""

    name: str  # what is limited, for messages ("shared memory", "L1 cache", ...)
    capacity: int
    monomials: Tuple[Monomial, ...]
    unit: str = "elements"

    def usage(self, tiles: Sequence[int]) -> int:
        total = 0
        for coef, loops in self.monomials:
            term = coef
            for d in loops:
                term *= tiles[d]
            total += term
        return total


@dataclass(frozen=True)
class Infeasible:
    """No tile configuration exists; ``reason`` says why in one line."""

    reason: str


@dataclass(frozen=True)
class Problem:
    """One EATSS case as an integer program over tile sizes ``T[d]``, loop order of the kernel.

    ``T[d]`` ranges over ``lower[d], lower[d] + step[d], ..., upper[d]`` (``step`` 0 marks an
    untiled loop fixed at ``lower``). Maximise ``objective(T)`` subject to every constraint and
    ``objective(T) >= T[d]`` for every loop.
    """

    loops: Tuple[str, ...]
    lower: Tuple[int, ...]
    upper: Tuple[int, ...]
    step: Tuple[int, ...]
    parallel: Tuple[int, ...]  # loop indices whose product is the block size B
    weights: Tuple[int, ...]  # H_d
    constraints: Tuple[Constraint, ...]
    alignment: int  # A
    coalescing_loop: str
    stride_scores: Tuple[int, ...]

    def block_size(self, tiles: Sequence[int]) -> int:
        b = 1
        for d in self.parallel:
            b *= tiles[d]
        return b

    def objective(self, tiles: Sequence[int]) -> int:
        w = self.block_size(tiles)
        for h, t in zip(self.weights, tiles):
            w += h * t
        return w

    def in_domain(self, tiles: Sequence[int]) -> bool:
        for t, lo, hi, st in zip(tiles, self.lower, self.upper, self.step):
            if st == 0:
                if t != lo:
                    return False
            elif not (lo <= t <= hi and t % st == 0):
                return False
        return True

    def violations(self, tiles: Sequence[int]) -> List[str]:
        """Every broken rule of the formulation for ``tiles`` (empty when feasible)."""
        out = []
        if len(tiles) != len(self.loops):
            return [f"expected {len(self.loops)} tile sizes, got {len(tiles)}"]
        if not self.in_domain(tiles):
            out.append("a tile size is outside its range or not a multiple of the alignment")
        for c in self.constraints:
            used = c.usage(tiles)
            if used > c.capacity:
                out.append(f"{c.name} needs {used} {c.unit} but {c.capacity} are available")
        w = self.objective(tiles)
        for name, t in zip(self.loops, tiles):
            if w < t:
                out.append(f"objective {w} is below the tile size {t} of loop {name}")
        return out

    def is_feasible(self, tiles: Sequence[int]) -> bool:
        return not self.violations(tiles)

    def domain(self, d: int) -> range:
        if self.step[d] == 0:
            return range(self.lower[d], self.lower[d] + 1)
        return range(self.lower[d], self.upper[d] + 1, self.step[d])


def _fraction(value: float, what: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise InvalidRequestError(f"{what} must be a number, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequestError(f"{what} must be finite, not {value!r}")
    # The decimal a user wrote (0.333), not the nearest binary double.
    return value if isinstance(value, Fraction) else Fraction(repr(float(value)))


def check_case(
    shared_fraction: float, warp_fraction: float, precision: str, bound: str
) -> Tuple[Fraction, Fraction]:
    """Validate the case options; returns ``(s, w)`` as exact fractions.

    Raises:
        InvalidRequestError: s outside [0, 1], w outside (0, 1], unknown precision or bound.
    """
    s = _fraction(shared_fraction, "shared fraction")
    w = _fraction(warp_fraction, "warp fraction")
    if not 0 <= s <= 1:
        raise InvalidRequestError(f"shared fraction {float(s)} is not in [0, 1]")
    if not 0 < w <= 1:
        raise InvalidRequestError(f"warp fraction {float(w)} is not in (0, 1]")
    if precision not in PRECISIONS:
        raise InvalidRequestError(f"precision must be single or double, not {precision!r}")
    if bound not in BOUNDS:
        raise InvalidRequestError(f"bound must be paper or artifact, not {bound!r}")
    return s, w


def build_problem(
    kernel: Kernel,
    gpu: GpuResources,
    shared_fraction: float = 0.0,
    warp_fraction: float = 1.0,
    precision: str = "double",
    bound: str = "paper",
) -> Union[Problem, Infeasible]:
    """The integer program of one case, or why there is none.

    Raises:
        InvalidRequestError: bad case options (see :func:`check_case`).
    """
    s, w = check_case(shared_fraction, warp_fraction, precision, bound)
    p = 2 if precision == "double" else 1

    tpw = Fraction(gpu.threads_per_warp, p)
    tpb = math.floor(Fraction(gpu.threads_per_block, p))
    l1 = Fraction(gpu.l1_bytes, 4 * p)
    l2 = math.floor(Fraction(gpu.l2_bytes, 4 * p))
    shpb = math.floor(Fraction(gpu.shared_per_block_bytes, 4 * p))
    if gpu.shared_per_sm_bytes is None:  # one L1 + shared pool: s carves shared memory out of it
        sh = math.floor(l1 * s)
        l1_cache = l1 - sh
    else:  # separate shared memory (Maxwell, Pascal): s is its share; the L1 keeps its size
        sh = math.floor(Fraction(gpu.shared_per_sm_bytes, 4 * p) * s)
        l1_cache = l1
    align = math.floor(w * tpw)

    if sh > shpb:
        return Infeasible(
            f"shared fraction {float(s):g} gives {sh} elements of shared memory per SM, "
            f"more than the {shpb} a block may use"
        )
    if align < 1:
        return Infeasible(
            f"warp fraction {float(w):g} of a {tpw}-iteration warp leaves no alignment factor"
        )

    loops = kernel.loops
    pos = {name: d for d, name in enumerate(loops)}
    n = len(loops)

    # Stride scores and the coalescing loop.
    score = [0] * n
    for ref in kernel.refs:
        if ref.ndim >= 2:
            score[pos[ref.index[-1]]] += 1
    best = max(score)
    if best == 0:
        return Infeasible(
            "no coalescing loop: no reference with two or more dimensions has a stride-1 loop"
        )
    ls1 = score.index(best)

    parallel = tuple(sorted(pos[name] for name in set(kernel.parallel)))
    par_set = set(parallel)
    weights = tuple(
        (score[d] - (1 if d in par_set else 0)) * score[d] * (align if d == ls1 else 1)
        for d in range(n)
    )

    # Tile ranges.
    extent: Dict[int, int] = {}
    for ref in kernel.refs:
        for it, size in zip(ref.index, ref.extent):
            extent.setdefault(pos[it], size)
    lower: List[int] = []
    upper: List[int] = []
    step: List[int] = []
    for d in range(n):
        ext: Optional[int] = extent.get(d)
        if bound == "paper" and ext is not None and ext < align:
            lower.append(ext)
            upper.append(ext)
            step.append(0)
            continue
        limit = tpb if (bound == "artifact" or ext is None) else min(tpb, ext)
        top = limit // align * align
        if top < align:  # only when TPB < A: no multiple of A fits in a block
            return Infeasible(
                f"loop {loops[d]}: no multiple of the alignment {align} is at most {limit}"
            )
        lower.append(align)
        upper.append(top)
        step.append(align)

    # References: cache (>= 2 dims, stride-1 loop is ls1) and shared memory (all others).
    def merged(refs: Sequence) -> Tuple[Monomial, ...]:
        counts: Dict[Tuple[int, ...], int] = {}
        for ref in refs:
            key = tuple(sorted({pos[it] for it in ref.index}))
            counts[key] = counts.get(key, 0) + 1
        return tuple((c, key) for key, c in sorted(counts.items()))

    cache_refs = [r for r in kernel.refs if r.ndim >= 2 and pos[r.index[-1]] == ls1]
    shared_refs = [r for r in kernel.refs if not (r.ndim >= 2 and pos[r.index[-1]] == ls1)]
    n_refs = len({r.array for r in kernel.refs})

    constraints: List[Constraint] = []
    if sh > 0 and shared_refs:
        constraints.append(Constraint("shared memory", min(sh, shpb), merged(shared_refs)))
    if l1_cache > 0:
        constraints.append(Constraint("L1 cache", math.floor(l1_cache), merged(cache_refs)))
    constraints.append(Constraint("L2 cache", l2, merged(cache_refs)))
    regs = math.floor(Fraction(gpu.registers_per_sm, p) / (p * n_refs))
    constraints.append(Constraint("registers (block size)", regs, ((1, parallel),), "threads"))

    return Problem(
        loops=loops,
        lower=tuple(lower),
        upper=tuple(upper),
        step=tuple(step),
        parallel=parallel,
        weights=weights,
        constraints=tuple(constraints),
        alignment=align,
        coalescing_loop=loops[ls1],
        stride_scores=tuple(score),
    )
