"""``governor kernels``: the library's CUDA kernels, compiled for a board with NVRTC.

``list`` names them with what each tile becomes; ``compile`` builds the configuration the
board's selector chooses (or ``--tiles``) for the board's architecture and prints the source,
the architecture and ptxas's registers per thread, shared memory per block and threads per
block. A configuration that cannot launch is one line naming the limit, exit 1.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Dict, List, Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, JsonOpt, emit_json

__all__ = ["register"]


class Precision(str, Enum):
    single = "single"
    double = "double"


def register(app: typer.Typer) -> None:
    kernels_app = typer.Typer(
        help="CUDA kernels that take the tuned tiles: list them, compile them for a board.",
        no_args_is_help=True,
    )
    kernels_app.command("list")(list_cmd)
    kernels_app.command("compile")(compile_cmd)
    kernels_app.command("table")(table_cmd)
    app.add_typer(kernels_app, name="kernels")


def list_cmd(json_out: JsonOpt = False) -> None:
    """The library kernels, their loops, and what each tile becomes in the launch."""
    from governor.kernels import KERNELS

    docs: List[Dict[str, Any]] = [
        {
            "kernel": t.name,
            "loops": list(t.loops),
            "eatss_kernel": t.eatss_kernel,
            "wavefront": t.wavefront,
            "mapping": t.mapping,
        }
        for t in KERNELS.values()
    ]
    if json_out:
        emit_json(docs)
        return
    for doc in docs:
        typer.echo(f"{doc['kernel']:<10} loops {','.join(doc['loops'])}: {doc['mapping']}")


def compile_cmd(
    kernel: Annotated[str, typer.Argument(help="Library kernel (governor kernels list).")],
    board: Annotated[str, typer.Option("--board", help="Catalog board, e.g. agx-orin, a100-sxm.")],
    tiles: Annotated[
        Optional[str],
        typer.Option(
            "--tiles",
            callback=values.tile_sizes(),
            help="Tiles per loop, i=16,j=64,k=8 (default: the board's selector).",
        ),
    ] = None,
    threads: Annotated[
        Optional[int],
        typer.Option(
            "--threads",
            callback=values.count(le=values.INT32_MAX),
            help="Threads per block to aim for (default 256; a wavefront uses tile i).",
        ),
    ] = None,
    precision: Annotated[Precision, typer.Option("--precision")] = Precision.double,
    shared_fraction: Annotated[
        Optional[float],
        typer.Option(
            "--shared-fraction",
            callback=values.number(ge=0, le=1),
            help="Carveout for shared memory (default: the selector's case, or 0).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Compile a kernel for a board's architecture and report what the compiler made of it."""
    from governor.kernels import build_kernel

    given = values.parse_tile_sizes(tiles) if tiles else None
    board = _board(board)
    built = build_kernel(kernel, board, given, threads, precision.value, shared_fraction)
    if json_out:
        emit_json(built.to_dict())
        return
    plan, report, occ = built.plan, built.report, built.occupancy
    tile_text = " x ".join(f"{k}={v}" for k, v in plan.tiles.items())
    typer.echo(
        f"{plan.kernel} on {built.board} (CC {built.compute_capability}, {report.arch}, "
        f"NVRTC {report.nvrtc_version}), {plan.precision}\n"
        f"tile                 {tile_text}  ({built.selection.note})\n"
        f"thread block         {'x'.join(str(d) for d in plan.thread_block)} = "
        f"{plan.threads_per_block} threads, {plan.work_per_thread} points per thread\n"
        f"registers / thread   {report.registers_per_thread}"
        f" (spills: {report.spill_store_bytes} B stored, {report.spill_load_bytes} B loaded)\n"
        f"shared memory        {report.shared_memory_bytes} bytes per block, carveout "
        f"{plan.carveout_percent}%\n"
        f"occupancy            {occ.occupancy:.1%} ({occ.blocks_per_sm} blocks per SM, "
        f"limited by {occ.limited_by})\n"
    )
    typer.echo(built.source)


def table_cmd(
    kernel: Annotated[str, typer.Argument(help="Library kernel (governor kernels list).")],
    board: Annotated[str, typer.Option("--board", help="Catalog board, e.g. agx-orin, a100-sxm.")],
    precision: Annotated[Precision, typer.Option("--precision")] = Precision.double,
    save: Annotated[
        bool, typer.Option("--save", help="Store the table in the board's profile.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """The least-energy tile and thread block at each clock of the board, and at each memory
    clock where the board has several (compiles each)."""
    from governor.kernels.operating_points import best_table, save_table

    board = _board(board)
    table = best_table(kernel, board, precision.value)
    saved = save_table(table) if save else None
    if json_out:
        doc = table.to_dict()
        doc["bands"] = _bands(table, None)
        if table.has_mem_axis:
            doc["mem_bands"] = [
                {"mem_clock_mhz": m, "bands": _bands(table, m)} for m in table.mem_clocks_mhz
            ]
        if saved is not None:
            doc["saved"] = str(saved)
        emit_json(doc)
        return
    typer.echo(f"{kernel} on {board} ({precision.value}): least energy per run at each clock")
    if not table.has_mem_axis:
        _echo_bands(table, None, "  ")
    for m in reversed(table.mem_clocks_mhz):
        default = " (default)" if m == table.default_mem_clock_mhz else ""
        typer.echo(f"  memory clock {m:g} MHz{default}")
        _echo_bands(table, m, "    ")
    if saved is not None:
        typer.echo(f"saved to {saved}")


def _bands(table: Any, mem_clock_mhz: Optional[float]) -> List[Dict[str, Any]]:
    return [
        {"from_clock_mhz": lo, "to_clock_mhz": hi, **config.to_dict()}
        for lo, hi, config in table.bands(mem_clock_mhz)
    ]


def _echo_bands(table: Any, mem_clock_mhz: Optional[float], indent: str) -> None:
    for lo, hi, config in table.bands(mem_clock_mhz):
        tile = " x ".join(f"{k}={v}" for k, v in config.tile.items())
        block = "x".join(str(d) for d in config.thread_block)
        typer.echo(
            f"{indent}{lo:>8g} - {hi:<8g} MHz  tile {tile}, thread block {block} "
            f"({config.threads_per_block} threads, {config.registers_per_thread} registers)"
        )


def _board(name: str) -> str:
    """A catalog board, also spelt as its device URI (``sim:agx-orin``)."""
    from governor.devices.sim.catalog import catalog_board

    return catalog_board(name)
