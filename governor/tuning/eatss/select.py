"""Tile-size selection: one case, every catalog case, or the k best configurations."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from governor.errors import InvalidRequestError
from governor.tuning.eatss.catalog import builtin_kernels, find_gpu, find_kernel
from governor.tuning.eatss.formulation import Infeasible, Problem, build_problem
from governor.tuning.eatss.gpus import GpuResources
from governor.tuning.eatss.model import Kernel
from governor.tuning.eatss.solver import search

__all__ = ["WARP_FRACTIONS", "TileChoice", "TileResult", "select_tiles", "select_all"]

WARP_FRACTIONS = (1.0, 0.5, 0.25, 0.125)


@dataclass(frozen=True)
class TileChoice:
    """One configuration: tile size per loop (loop order) and its objective ``W``."""

    tiles: Dict[str, int]
    objective: int

    def to_dict(self) -> Dict[str, Any]:
        return {"tiles": dict(self.tiles), "objective": self.objective}


@dataclass(frozen=True)
class TileResult:
    """The answer to one EATSS case: the best tiles and ``W``, or the reason there are none.

    ``alternatives`` holds the next best configurations when more than one was asked for.
    """

    kernel: str
    gpu: str
    shared_fraction: float
    warp_fraction: float
    precision: str
    bound: str
    tiles: Optional[Dict[str, int]]
    objective: Optional[int]
    solve_ms: float
    reason: Optional[str] = None
    alignment: Optional[int] = None
    coalescing_loop: Optional[str] = None
    # B of the formulation: points of one tile over the parallel loops. Not a thread block:
    # governor.kernels maps a tile to at most 1024 threads, each covering several points.
    parallel_tile_points: Optional[int] = None
    alternatives: List[TileChoice] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return self.tiles is not None

    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {
            "kernel": self.kernel,
            "gpu": self.gpu,
            "shared_fraction": self.shared_fraction,
            "warp_fraction": self.warp_fraction,
            "precision": self.precision,
            "bound": self.bound,
        }
        if self.feasible:
            doc["tiles"] = dict(self.tiles or {})
            doc["objective"] = self.objective
        else:
            doc["error"] = self.reason
        doc["solve_ms"] = round(self.solve_ms, 3)
        if self.alignment is not None:
            doc["alignment"] = self.alignment
        if self.coalescing_loop is not None:
            doc["coalescing_loop"] = self.coalescing_loop
        if self.parallel_tile_points is not None:
            doc["parallel_tile_points"] = self.parallel_tile_points
        if self.alternatives:
            doc["top"] = [c.to_dict() for c in self.alternatives]
        return doc


def _resolve_kernel(kernel: Union[str, Kernel]) -> Kernel:
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str):
        return find_kernel(kernel)
    raise InvalidRequestError(f"kernel must be a name or a Kernel, not {type(kernel).__name__}")


def _resolve_gpu(gpu: Union[str, GpuResources]) -> GpuResources:
    if isinstance(gpu, GpuResources):
        return gpu
    if isinstance(gpu, str):
        return find_gpu(gpu)
    raise InvalidRequestError(f"gpu must be a name or GpuResources, not {type(gpu).__name__}")


def select_tiles(
    kernel: Union[str, Kernel],
    gpu: Union[str, GpuResources],
    shared_fraction: float = 0.0,
    warp_fraction: float = 1.0,
    precision: str = "double",
    bound: str = "paper",
    top: int = 1,
) -> TileResult:
    """The tile sizes that maximise the EATSS objective exactly, for one case.

    ``top`` > 1 also returns the next best configurations (``alternatives``, best first,
    the optimum included). An infeasible case is a result whose ``reason`` says why.

    Raises:
        InvalidRequestError: unknown kernel, bad options.
        DeviceNotFoundError: unknown GPU name.
    """
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InvalidRequestError(f"top must be a positive integer, not {top!r}")
    k = _resolve_kernel(kernel)
    g = _resolve_gpu(gpu)
    start = time.perf_counter()
    problem = build_problem(k, g, shared_fraction, warp_fraction, precision, bound)
    best: Sequence = []
    if isinstance(problem, Problem):
        best = search(problem, top)
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    common: Dict[str, Any] = dict(
        kernel=k.name,
        gpu=g.name,
        shared_fraction=float(shared_fraction),
        warp_fraction=float(warp_fraction),
        precision=precision,
        bound=bound,
        solve_ms=elapsed_ms,
    )
    if isinstance(problem, Infeasible):
        return TileResult(tiles=None, objective=None, reason=problem.reason, **common)
    extra: Dict[str, Any] = dict(
        alignment=problem.alignment, coalescing_loop=problem.coalescing_loop
    )
    if not best:
        return TileResult(
            tiles=None, objective=None, reason=_nothing_fits(problem), **common, **extra
        )
    choices = [TileChoice(dict(zip(problem.loops, tiles)), w) for w, tiles in best]
    w0, tiles0 = best[0]
    return TileResult(
        tiles=choices[0].tiles,
        objective=w0,
        parallel_tile_points=problem.block_size(tiles0),
        alternatives=choices if top > 1 else [],
        **common,
        **extra,
    )


def _nothing_fits(problem: Problem) -> str:
    smallest = list(problem.lower)
    broken = problem.violations(smallest)
    detail = broken[0] if broken else "no configuration satisfies every constraint"
    return f"nothing fits: with every tile at its smallest, {detail}"


def select_all(
    gpu: Union[str, GpuResources],
    precision: str = "double",
    bound: str = "paper",
    kernels: Optional[Iterable[Union[str, Kernel]]] = None,
    shared_fractions: Optional[Sequence[float]] = None,
    warp_fractions: Sequence[float] = WARP_FRACTIONS,
) -> List[TileResult]:
    """Every kernel (the catalog by default) × the GPU's shared fractions × warp fractions."""
    g = _resolve_gpu(gpu)
    ks = [
        _resolve_kernel(k) for k in (kernels if kernels is not None else builtin_kernels().values())
    ]
    fractions = tuple(shared_fractions) if shared_fractions is not None else g.shared_fractions
    return [
        select_tiles(k, g, s, w, precision, bound)
        for k in ks
        for s in fractions
        for w in warp_fractions
    ]
