"""``governor occupancy``: theoretical occupancy of a thread block on a compute capability."""

from __future__ import annotations

from typing import Any, Dict, Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, JsonOpt, emit_json


def register(app: typer.Typer) -> None:
    app.command("occupancy")(occupancy_cmd)


def occupancy_cmd(
    cc: Annotated[
        Optional[str],
        typer.Option("--cc", help="Compute capability, e.g. 8.6 (5.0 to 12.1)."),
    ] = None,
    threads: Annotated[
        Optional[str],
        typer.Option(
            "--threads",
            callback=values.integers(sep="x", le=1024),
            help="Threads per block: N, XxY or XxYxZ.",
        ),
    ] = None,
    registers: Annotated[
        int,
        typer.Option(
            "--registers",
            callback=values.integer(ge=0, le=255),
            help="Registers per thread (0: not limiting).",
        ),
    ] = 0,
    shared_bytes: Annotated[
        int,
        typer.Option(
            "--shared-bytes",
            callback=values.integer(ge=0, le=values.MAX_SHARED_BYTES, unit="bytes"),
            help="Shared memory per block (B).",
        ),
    ] = 0,
    from_kernel: Annotated[
        Optional[str],
        typer.Option(
            "--from-kernel",
            help="Library kernel compiled for --board: NVRTC's registers and shared memory.",
        ),
    ] = None,
    board: Annotated[
        Optional[str], typer.Option("--board", help="Catalog board for --from-kernel.")
    ] = None,
    tiles: Annotated[
        Optional[str],
        typer.Option(
            "--tiles",
            callback=values.tile_sizes(),
            help="Tiles for --from-kernel, i=16,j=64 (default: the board's selector).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """How many blocks fit on one SM, the occupancy, and which limit binds."""
    from governor.tuning.occupancy import occupancy

    doc: Dict[str, Any] = {}
    if from_kernel is not None:
        if board is None:
            raise typer.BadParameter("--from-kernel needs --board", param_hint="--board")
        if cc is not None or threads is not None or registers or shared_bytes:
            raise typer.BadParameter(
                "--from-kernel takes the CC, threads, registers and shared memory from the "
                "compiled kernel: leave out --cc, --threads, --registers, --shared-bytes",
                param_hint="--from-kernel",
            )
        from governor.devices.sim.catalog import catalog_board
        from governor.kernels import build_kernel

        board = catalog_board(board)
        built = build_kernel(from_kernel, board, values.parse_tile_sizes(tiles) if tiles else None)
        occ = built.occupancy
        registers = built.report.registers_per_thread
        shared_bytes = built.report.shared_memory_bytes
        doc = {
            "kernel": from_kernel,
            "board": board,
            "tile": dict(built.plan.tiles),
            "registers_per_thread": registers,
            "shared_memory_bytes": shared_bytes,
        }
    else:
        if cc is None or threads is None:
            raise typer.BadParameter(
                "give --cc and --threads, or --from-kernel with --board", param_hint="--cc"
            )
        occ = occupancy(cc, threads, registers, shared_bytes)
    if json_out:
        doc.update(occ.to_dict())
        emit_json(doc)
        return
    limits = ", ".join(f"{name} {n}" for name, n in occ.limits)
    if doc:
        typer.echo(
            f"{from_kernel} on {board}: {registers} registers per thread, {shared_bytes} bytes "
            f"of shared memory per block (NVRTC)"
        )
    typer.echo(
        f"CC {occ.compute_capability}, block {'x'.join(str(d) for d in occ.block)} "
        f"({occ.threads_per_block} threads, {occ.warps_per_block} warps)\n"
        f"blocks per SM      {occ.blocks_per_sm}  (by limit: {limits})\n"
        f"active warps / SM  {occ.active_warps_per_sm}\n"
        f"occupancy          {occ.occupancy:.1%}  limited by {occ.limited_by}"
    )
