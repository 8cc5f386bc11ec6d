"""A library kernel for a board: tiles, launch plan, CUDA source, NVRTC's figures, checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from governor.errors import InvalidRequestError
from governor.kernels.mapping import (
    LaunchError,
    LaunchPlan,
    find_template,
    plan_launch,
    static_shared_limit_bytes,
)
from governor.kernels.nvrtc import CompileReport, compile_source
from governor.kernels.select import TileSelection, board_arch, select_kernel_tiles
from governor.kernels.templates import render
from governor.tuning.occupancy import ArchLimits, Occupancy

__all__ = ["BuiltKernel", "build_kernel", "check_launch", "kernel_source"]


@dataclass(frozen=True)
class BuiltKernel:
    """A compiled configuration: what was chosen, what NVRTC made of it, its occupancy."""

    board: str
    compute_capability: str
    selection: TileSelection
    plan: LaunchPlan
    source: str
    report: CompileReport
    occupancy: Occupancy  # from the compiler's figures

    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {
            "kernel": self.plan.kernel,
            "board": self.board,
            "compute_capability": self.compute_capability,
            "arch": self.report.arch,
        }
        doc.update(self.plan.to_dict())
        doc["registers_per_thread"] = self.report.registers_per_thread
        doc["shared_memory_bytes"] = self.report.shared_memory_bytes
        doc["spill_store_bytes"] = self.report.spill_store_bytes
        doc["spill_load_bytes"] = self.report.spill_load_bytes
        doc["blocks_per_sm"] = self.occupancy.blocks_per_sm
        doc["occupancy"] = self.occupancy.occupancy
        doc["occupancy_limited_by"] = self.occupancy.limited_by
        doc["tiles_from"] = self.selection.to_dict()
        doc["nvrtc_version"] = self.report.nvrtc_version
        doc["source"] = self.source
        return doc


def kernel_source(plan: LaunchPlan) -> str:
    """The CUDA C source of a launch plan."""
    return render(find_template(plan.kernel), plan.tiles, plan.thread_block, plan.precision)


def check_launch(plan: LaunchPlan, report: CompileReport, limits: ArchLimits) -> Occupancy:
    """The occupancy of the compiled kernel; raises LaunchError where it cannot launch.

    Raises:
        LaunchError: shared memory over the block's limit, or registers x threads over the
            registers a block may use.
    """
    from governor.tuning.occupancy import occupancy

    shared_limit = static_shared_limit_bytes(limits)
    if report.shared_memory_bytes > shared_limit:
        raise LaunchError(
            f"shared memory per block {report.shared_memory_bytes} bytes exceeds the limit "
            f"of {shared_limit} bytes on CC {limits.cc}"
        )
    try:
        return occupancy(
            limits,
            plan.thread_block,
            report.registers_per_thread,
            report.shared_memory_bytes,
        )
    except InvalidRequestError as err:
        raise LaunchError(str(err)) from err


def build_kernel(
    kernel: str,
    board: str,
    tiles: Optional[Mapping[str, int]] = None,
    threads_per_block: Optional[int] = None,
    precision: str = "double",
    shared_fraction: Optional[float] = None,
) -> BuiltKernel:
    """Compile library kernel ``kernel`` for ``board`` at the selector's tiles (or ``tiles``).

    Raises:
        InvalidRequestError: unknown kernel or bad tiles.
        DeviceNotFoundError: unknown board.
        LaunchError: the configuration cannot launch on the board (names the limit).
        UnsupportedError: NVRTC is not installed.
        CompileError: NVRTC rejected the source.
    """
    template = find_template(kernel)
    arch = board_arch(board)
    if tiles is None:
        selection = select_kernel_tiles(kernel, board, precision)
    else:
        selection = TileSelection(
            kernel=kernel,
            board=board,
            tiles=dict(tiles),
            selector="given",
            shared_fraction=0.0 if shared_fraction is None else float(shared_fraction),
            warp_fraction=None,
            objective=None,
            precision=precision,
            note="tiles given by the caller",
        )
    fraction = selection.shared_fraction if shared_fraction is None else float(shared_fraction)
    plan = plan_launch(kernel, selection.tiles, arch.limits, threads_per_block, fraction, precision)
    source = kernel_source(plan)
    report = compile_source(source, template.entry, arch.arch)
    occ = check_launch(plan, report, arch.limits)
    return BuiltKernel(
        board=board,
        compute_capability=arch.compute_capability,
        selection=selection,
        plan=plan,
        source=source,
        report=report,
        occupancy=occ,
    )
