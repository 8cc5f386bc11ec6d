"""The tiles a board's selector chooses for a library kernel.

EATSS (``governor.tuning.eatss``) chooses them where the board has an EATSS resource set:
the largest warp fraction (1, 1/2, 1/4, 1/8) with a feasible case that also launches, and
within it the shared fraction with the largest objective W (the smaller fraction on a tie).
A board without a resource set (separate L1 and shared memory: Nano, TX2, Titan X) gets
PPCG's default tiles, 32 in every loop, the baseline of the EATSS paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional

from governor.errors import DeviceNotFoundError
from governor.kernels.mapping import LaunchError, find_template, plan_launch
from governor.tuning.occupancy import ArchLimits, arch_limits

if TYPE_CHECKING:
    from governor.tuning.eatss.gpus import GpuResources

__all__ = ["BoardArch", "TileSelection", "board_arch", "select_kernel_tiles"]

PPCG_DEFAULT_TILE = 32


@dataclass(frozen=True)
class BoardArch:
    """A catalog board's compute capability and the NVRTC target for it."""

    board: str
    compute_capability: str
    limits: ArchLimits

    @property
    def arch(self) -> str:
        return "sm_" + self.compute_capability.replace(".", "")


def board_arch(board: str) -> BoardArch:
    """The compute capability of catalog board ``board``.

    Raises:
        DeviceNotFoundError: unknown board (the message lists the known ones), or a board
            whose compute capability the catalog does not give.
    """
    from governor.devices.sim.catalog import get_board

    spec = get_board(board)
    cc = spec.facts.get("cc")
    if not cc:
        raise DeviceNotFoundError(f"board {board} has no known compute capability")
    limits = arch_limits(str(cc))
    return BoardArch(board=board, compute_capability=limits.cc, limits=limits)


@dataclass(frozen=True)
class TileSelection:
    """Tiles for one kernel on one board, with the case that produced them."""

    kernel: str
    board: str
    tiles: Dict[str, int]
    selector: str  # "eatss" | "ppcg-default" | "given"
    shared_fraction: float
    warp_fraction: Optional[float]
    objective: Optional[int]
    precision: str
    note: str

    def to_dict(self) -> Dict[str, Any]:
        return {
            "selector": self.selector,
            "shared_fraction": self.shared_fraction,
            "warp_fraction": self.warp_fraction,
            "objective": self.objective,
            "note": self.note,
        }


def _eatss_resources(board: str) -> Optional[GpuResources]:
    from governor.tuning.eatss import builtin_gpus

    return builtin_gpus().get(board)


def select_kernel_tiles(kernel: str, board: str, precision: str = "double") -> TileSelection:
    """The tiles the board's selector chooses for library kernel ``kernel``.

    Raises:
        InvalidRequestError: unknown kernel.
        DeviceNotFoundError: unknown board.
    """
    from governor.tuning.eatss import WARP_FRACTIONS, select_tiles

    template = find_template(kernel)
    arch = board_arch(board)
    resources = _eatss_resources(board)

    def ppcg_default(note: str) -> TileSelection:
        return TileSelection(
            kernel=kernel,
            board=board,
            tiles={loop: PPCG_DEFAULT_TILE for loop in template.loops},
            selector="ppcg-default",
            shared_fraction=0.0,
            warp_fraction=None,
            objective=None,
            precision=precision,
            note=note,
        )

    if resources is None:
        return ppcg_default(
            f"no EATSS resource set for {board}: PPCG's default tiles (32 per loop)"
        )
    for warp in WARP_FRACTIONS:
        best = None
        for shared in resources.shared_fractions:
            result = select_tiles(template.eatss_kernel, resources, shared, warp, precision)
            if result.tiles is None or result.objective is None:
                continue
            tiles = {loop: int(result.tiles[loop]) for loop in template.loops}
            try:
                plan_launch(kernel, tiles, arch.limits, None, shared, precision)
            except LaunchError:
                continue
            if best is None or int(result.objective) > best[0]:
                best = (int(result.objective), shared, tiles)
        if best is not None:
            objective, shared, tiles = best
            return TileSelection(
                kernel=kernel,
                board=board,
                tiles=tiles,
                selector="eatss",
                shared_fraction=shared,
                warp_fraction=warp,
                objective=objective,
                precision=precision,
                note=(
                    f"EATSS on {template.eatss_kernel}, warp fraction {warp:g}, shared "
                    f"fraction {shared:g} ({precision})"
                ),
            )
    return ppcg_default(
        f"no EATSS case for {template.eatss_kernel} fits {board}: PPCG's default tiles"
    )
