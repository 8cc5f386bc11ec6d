"""One record per library kernel, and the registry that finds them.

A kernel of the library is one module of :mod:`governor.kernels.library` that defines
``KERNEL``, a :class:`KernelDescription`: its CUDA C template and entry point, its loops and
tile names, how tiles become a thread block (the default spreads the block over
``block_loops``; a wavefront kernel brings its own rule), how a launch is made (grid, waves,
arguments: ``run``), its global-memory traffic per point, the modelled problem size and
memory share used by the per-clock tables, its NumPy reference and its test problems. Every
other module of ``governor.kernels`` (mapping, templates, the CuPy runner, the GPU check's
cases, the per-clock tables) reads the description; adding a kernel is adding one module.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Tuple

if TYPE_CHECKING:
    from governor.kernels.mapping import LaunchPlan
    from governor.tuning.occupancy import ArchLimits

__all__ = [
    "BlockRule",
    "KernelDescription",
    "Problem",
    "descriptions",
    "span",
    "stencil_traffic",
]

#: ``(tiles, arch, threads_target) -> (thread block shape, points per thread)``
BlockRule = Callable[[Mapping[str, int], "ArchLimits", int], Tuple[Tuple[int, int, int], int]]
#: ``(cupy, compiled function, plan, *arrays, **params) -> result array``: the launches
RunFn = Callable[..., Any]
#: ``(*arrays, **params) -> numpy array``: what ``run`` must compute
ReferenceFn = Callable[..., Any]


@dataclass(frozen=True)
class Problem:
    """Inputs of one run: NumPy arrays (``run``'s and ``reference``'s positional arguments)
    and scalar parameters (their keyword arguments); ``in_place`` names the arrays a run
    overwrites (index into ``arrays``), which a caller copies before each run."""

    arrays: Tuple[Any, ...]
    params: Dict[str, float] = field(default_factory=dict)
    in_place: Tuple[int, ...] = ()

    @property
    def points(self) -> int:
        """Elements of the largest array (the work the problem stands for)."""
        return max(int(a.size) for a in self.arrays)


#: ``(numpy Generator, tiles, numpy dtype) -> Problem``: a small problem covering at least
#: one whole tile and one partial tile in every tiled dimension
ProblemFn = Callable[[Any, Mapping[str, int], Any], Problem]
#: ``(numpy Generator, numpy dtype) -> Problem``: the GPU check's fixed problem
CheckProblemFn = Callable[[Any, Any], Problem]
#: ``tiles -> global-memory traffic per point`` (relative; the tables use ratios)
TrafficFn = Callable[[Mapping[str, int]], float]


@dataclass(frozen=True)
class KernelDescription:
    """Everything the library knows about one kernel (see the module docstring)."""

    name: str
    entry: str  # the extern "C" function of the source
    loops: Tuple[str, ...]  # outermost first; one tile per loop, #define TILE_<LOOP>
    eatss_kernel: str  # the EATSS loop nest that chooses the tiles
    block_loops: Tuple[str, ...]  # loops spread over thread-block dimensions x, y, z
    mapping: str  # what each tile becomes, in words (docs and the source's first line)
    body: str  # CUDA C after the #define lines
    run: RunFn
    reference: ReferenceFn
    problem: ProblemFn
    check_problem: CheckProblemFn
    traffic: TrafficFn
    memory_share: float  # share of a run spent on memory at the selected tiles (assumed)
    problem_points: int  # points of the problem the per-clock tables model
    small_tiles: Dict[str, int]  # the GPU check's third configuration
    staged: Tuple[str, ...] = ()  # loops whose tiles span the shared-memory slab
    wavefront: bool = False  # DOACROSS: tiles run in skewed waves, one launch per wave
    block_rule: Optional[BlockRule] = None  # None: spread over block_loops
    tolerance: float = 1e-9  # relative error allowed in double precision
    tolerance_single: float = 2e-5  # ... in single precision

    def tolerance_for(self, precision: str) -> float:
        return self.tolerance if precision == "double" else self.tolerance_single

    def launch(self, cupy: Any, func: Any, plan: LaunchPlan, problem: Problem) -> Any:
        """Run ``problem`` (its arrays already on the device, in order) with ``func``."""
        return self.run(cupy, func, plan, *problem.arrays, **problem.params)

    def expected(self, problem: Problem) -> Any:
        """The NumPy reference's result for ``problem`` (host arrays)."""
        return self.reference(*(a.copy() for a in problem.arrays), **problem.params)


def span(tile: int) -> int:
    """A problem extent that holds one whole tile and one partial one: ``tile + tile/2 + 1``."""
    return tile + tile // 2 + 1


def stencil_traffic(loops: Tuple[str, ...], halo: int = 2) -> TrafficFn:
    """Traffic per point of a stencil: ``(tile + halo) / tile`` per loop, plus one write."""

    def traffic(tile: Mapping[str, int]) -> float:
        ratio = 1.0
        for loop in loops:
            ratio *= (tile[loop] + halo) / tile[loop]
        return ratio + 1.0

    return traffic


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@functools.lru_cache(maxsize=1)
def descriptions() -> Dict[str, KernelDescription]:
    """Every kernel of :mod:`governor.kernels.library`, by name, in module-name order."""
    from governor.kernels import library as package

    found: Dict[str, KernelDescription] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        description = getattr(module, "KERNEL", None)
        if not isinstance(description, KernelDescription):
            raise TypeError(f"{module.__name__} defines no KERNEL = KernelDescription(...)")
        if description.name in found:
            raise TypeError(f"two library kernels are named {description.name!r}")
        found[description.name] = description
    return found
