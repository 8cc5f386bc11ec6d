"""``governor occupancy``: theoretical occupancy of a thread block on a compute capability."""

from __future__ import annotations

import typer

from governor.cli import values
from governor.cli.common import Annotated, JsonOpt, emit_json


def register(app: typer.Typer) -> None:
    app.command("occupancy")(occupancy_cmd)


def occupancy_cmd(
    cc: Annotated[str, typer.Option("--cc", help="Compute capability, e.g. 8.6 (5.0 to 12.1).")],
    threads: Annotated[
        str,
        typer.Option(
            "--threads",
            callback=values.integers(sep="x", le=1024),
            help="Threads per block: N, XxY or XxYxZ.",
        ),
    ],
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
    json_out: JsonOpt = False,
) -> None:
    """How many blocks fit on one SM, the occupancy, and which limit binds."""
    from governor.tuning.occupancy import occupancy

    occ = occupancy(cc, threads, registers, shared_bytes)
    if json_out:
        emit_json(occ.to_dict())
        return
    limits = ", ".join(f"{name} {n}" for name, n in occ.limits)
    typer.echo(
        f"CC {occ.compute_capability}, block {'x'.join(str(d) for d in occ.block)} "
        f"({occ.threads_per_block} threads, {occ.warps_per_block} warps)\n"
        f"blocks per SM      {occ.blocks_per_sm}  (by limit: {limits})\n"
        f"active warps / SM  {occ.active_warps_per_sm}\n"
        f"occupancy          {occ.occupancy:.1%}  limited by {occ.limited_by}"
    )
