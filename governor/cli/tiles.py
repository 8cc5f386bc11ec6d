"""``governor tiles``: tile sizes for a loop nest on a GPU (EATSS; HHC and DOACROSS models)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, JsonOpt, emit_json
from governor.errors import InvalidRequestError

__all__ = ["register"]


class Model(str, Enum):
    eatss = "eatss"
    hhc = "hhc"
    doacross = "doacross"


class Precision(str, Enum):
    single = "single"
    double = "double"


class Bound(str, Enum):
    paper = "paper"
    artifact = "artifact"


class Objective(str, Enum):
    time = "time"
    energy = "energy"


def register(app: typer.Typer) -> None:
    @app.command("tiles")
    def tiles(
        kernel: Annotated[
            Optional[str], typer.Argument(help="Kernel name (catalog or --kernels FILE).")
        ] = None,
        gpu: Annotated[
            Optional[str],
            typer.Option(
                "--gpu",
                help="GPU: a catalog board (nano, agx-orin...) or its sim:NAME URI, a100, "
                "xavier, 2080ti, cuda:N; hhc: gtx980, titanx, titan-x.",
            ),
        ] = None,
        shared_fraction: Annotated[
            float,
            typer.Option(
                "--shared-fraction",
                callback=values.number(ge=0, le=1),
                help="Share of L1+shared (Maxwell, Pascal: of shared) given to shared memory.",
            ),
        ] = 0.0,
        warp_fraction: Annotated[
            float,
            typer.Option(
                "--warp-fraction",
                callback=values.number(gt=0, le=1),
                help="Tiles are multiples of this part of a warp.",
            ),
        ] = 1.0,
        precision: Annotated[Precision, typer.Option("--precision")] = Precision.double,
        bound: Annotated[
            Bound, typer.Option("--bound", help="Tile upper bound: paper (extents) or artifact.")
        ] = Bound.paper,
        all_cases: Annotated[
            bool,
            typer.Option(
                "--all", help="Every kernel x the GPU's shared fractions x 4 warp fractions."
            ),
        ] = False,
        top: Annotated[
            int,
            typer.Option(
                "--top", callback=values.count(le=1000), help="Also list the k best configurations."
            ),
        ] = 1,
        kernels_file: Annotated[
            Optional[Path], typer.Option("--kernels", help="TOML file of [kernel.NAME] tables.")
        ] = None,
        gpu_spec: Annotated[
            Optional[Path], typer.Option("--gpu-spec", help="TOML file of [gpu.NAME] tables.")
        ] = None,
        save: Annotated[
            bool, typer.Option("--save", help="Store the tiles in the board's profile.")
        ] = False,
        board: Annotated[
            Optional[str],
            typer.Option(
                "--board",
                help="Board whose profile to use: a catalog board or one with a profile "
                "(with --save, default: the board of --device).",
            ),
        ] = None,
        device: Annotated[
            Optional[str],
            typer.Option(
                "--device",
                "-d",
                help="Device URI whose board --save stores the tiles for (default: "
                "GOVERNOR_DEVICE, else the GPU found here).",
            ),
        ] = None,
        model: Annotated[
            Model, typer.Option("--model", help="eatss, or the analytic hhc / doacross models.")
        ] = Model.eatss,
        stencil: Annotated[Optional[str], typer.Option("--stencil", help="HHC stencil.")] = None,
        nest: Annotated[Optional[str], typer.Option("--nest", help="DOACROSS loop nest.")] = None,
        size: Annotated[
            Optional[str],
            typer.Option(
                "--size", callback=values.integers(), help="Problem size, comma-separated ints."
            ),
        ] = None,
        steps: Annotated[
            Optional[int],
            typer.Option("--steps", callback=values.count(le=values.INT32_MAX), help="Time steps."),
        ] = None,
        within: Annotated[
            float,
            typer.Option(
                "--within",
                callback=values.number(ge=0, lt=10),
                help="Shortlist within this fraction of the best.",
            ),
        ] = 0.10,
        objective: Annotated[Objective, typer.Option("--objective")] = Objective.time,
        json_out: JsonOpt = False,
    ) -> Optional[int]:
        """Choose tile sizes: EATSS (energy-aware, exact) or the HHC / DOACROSS time models."""
        if model is not Model.eatss:
            from governor.cli import tiles_analytic

            if board:  # its profile is read and the choice cached there: a real board only
                board = _checked_board(board)

            return tiles_analytic.run(
                model=model.value,
                stencil=stencil,
                nest=nest,
                gpu=gpu,
                size=size,
                steps=steps,
                within=within,
                objective=objective.value,
                board=board,
                json_out=json_out,
            )
        return _eatss(
            kernel=kernel,
            gpu=gpu,
            shared_fraction=shared_fraction,
            warp_fraction=warp_fraction,
            precision=precision.value,
            bound=bound.value,
            all_cases=all_cases,
            top=top,
            kernels_file=kernels_file,
            gpu_spec=gpu_spec,
            save=save,
            board=board,
            device=device,
            json_out=json_out,
        )


def _eatss(
    kernel: Optional[str],
    gpu: Optional[str],
    shared_fraction: float,
    warp_fraction: float,
    precision: str,
    bound: str,
    all_cases: bool,
    top: int,
    kernels_file: Optional[Path],
    gpu_spec: Optional[Path],
    save: bool,
    board: Optional[str],
    device: Optional[str],
    json_out: bool,
) -> int:
    from governor.tuning import eatss

    profile_board = _profile_board(board, device, save and not all_cases)
    if not gpu and profile_board is None:
        raise typer.BadParameter(
            "--gpu is required unless --board, --device or --save names the board",
            param_hint="--gpu",
        )
    resources = _resources(gpu, gpu_spec, profile_board)

    if all_cases:
        if kernel:
            raise typer.BadParameter("give a KERNEL or --all, not both", param_hint="--all")
        if save:
            raise InvalidRequestError("--save stores one case: give a KERNEL instead of --all")
        kernels = list(eatss.builtin_kernels().values())
        if kernels_file is not None:
            user = eatss.load_kernels(kernels_file)
            kernels = [k for k in kernels if k.name not in user] + list(user.values())
        results = eatss.select_all(resources, precision, bound, kernels=kernels)
        if json_out:
            emit_json([r.to_dict() for r in results])
        else:
            _print_all(results)
        return 0

    if not kernel:
        raise typer.BadParameter("give a KERNEL name or --all", param_hint="KERNEL")
    loop_nest = eatss.find_kernel(kernel, kernels_file)
    result = eatss.select_tiles(
        loop_nest, resources, shared_fraction, warp_fraction, precision, bound, top=top
    )
    note: Optional[Dict[str, Any]] = None
    if profile_board or result.feasible:
        note = eatss.clock_note(profile_board or resources.name)
    saved: Optional[Path] = None
    if save and result.feasible and profile_board is not None:
        saved = eatss.save_tiles(result, profile_board)

    doc = result.to_dict()
    if note is not None:
        doc["clock"] = note
    if saved is not None:
        doc["saved"] = str(saved)
    if json_out:
        emit_json(doc)
    else:
        shown = profile_board or (note and note["ppw_optimal_clock_mhz"])
        _print_one(result, note if shown else None, saved)
    if not result.feasible:
        sys.stderr.write(f"governor: error: {kernel} on {resources.name}: {result.reason}\n")
        return 1
    return 0


def _profile_board(board: Optional[str], device: Optional[str], save: bool) -> Optional[str]:
    """The board whose profile the tiles belong to: ``--board`` (a catalog board or one with a
    profile), else the board of ``--device`` (or the detected GPU) when saving; None when no
    profile is involved."""
    from governor.tuning import eatss

    if board and device:
        raise typer.BadParameter("give --board or --device, not both", param_hint="--board")
    if board:
        return _checked_board(board)
    if device or save:
        return eatss.current_board(device)
    return None


def _checked_board(board: str) -> str:
    """``board`` if it is a catalog board or has a profile; a usage error listing the boards
    otherwise (a GPU spec name or a typo would create a profile no runtime reads)."""
    from governor.tuning import eatss

    try:
        return eatss.check_board(board)
    except eatss.UnknownBoardError as err:
        raise typer.BadParameter(str(err), param_hint="--board") from None


def _resources(gpu: Optional[str], gpu_spec: Optional[Path], board: Optional[str]) -> Any:
    """The GPU resources: ``--gpu``, else the board's own built-in resource set."""
    from governor.errors import DeviceNotFoundError
    from governor.tuning import eatss

    if gpu:
        return eatss.find_gpu(gpu, gpu_spec)
    assert board is not None
    try:
        return eatss.find_gpu(board, gpu_spec)
    except DeviceNotFoundError:
        raise DeviceNotFoundError(
            f"no built-in GPU resources for board {board}: give --gpu NAME (with --gpu-spec FILE "
            "for a GPU of your own)"
        ) from None


def _tiles_text(tiles: Optional[Dict[str, int]]) -> str:
    return " ".join(f"{k}={v}" for k, v in (tiles or {}).items())


def _print_one(result: Any, note: Optional[Dict[str, Any]], saved: Optional[Path]) -> None:
    from rich.table import Table

    from governor.cli.common import console as console_

    console = console_()
    head = (
        f"{result.kernel} on {result.gpu}: shared fraction {result.shared_fraction:g}, "
        f"warp fraction {result.warp_fraction:g}, {result.precision}, {result.bound} bound"
    )
    console.print(head, highlight=False)
    if not result.feasible:
        return
    rows: List[Any] = result.alternatives or []
    table = Table()
    if rows:
        table.add_column("rank", justify="right")
    for loop in result.tiles:
        table.add_column(loop, justify="right")
    table.add_column("W", justify="right")
    if rows:
        for rank, choice in enumerate(rows, 1):
            cells = [str(v) for v in choice.tiles.values()]
            table.add_row(str(rank), *cells, str(choice.objective))
    else:
        table.add_row(*[str(v) for v in result.tiles.values()], str(result.objective))
    console.print(table)
    console.print(
        f"parallel tile {result.parallel_tile_points} points (not threads per block: see "
        f"governor kernels compile), coalescing loop {result.coalescing_loop}, "
        f"alignment {result.alignment}, solved exactly in {result.solve_ms:.2f} ms"
    )
    if note is not None:
        console.print(note["note"], highlight=False)
    if saved is not None:
        console.print(f"saved to {saved}", highlight=False)


def _print_all(results: List[Any]) -> None:
    from rich.table import Table

    from governor.cli.common import console as console_

    table = Table()
    for name, justify in (
        ("kernel", "left"),
        ("s", "right"),
        ("w", "right"),
        ("tiles", "left"),
        ("W", "right"),
        ("ms", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in results:
        table.add_row(
            r.kernel,
            f"{r.shared_fraction:g}",
            f"{r.warp_fraction:g}",
            _tiles_text(r.tiles) if r.feasible else f"[dim]{r.reason}[/dim]",
            str(r.objective) if r.feasible else "-",
            f"{r.solve_ms:.2f}",
        )
    console_().print(table)
