"""``governor profile list|show|import``: the profiles calibration wrote and the shipped ones."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from governor.cli.common import Annotated, JsonOpt, emit_json

profile_app = typer.Typer(
    help="Board profiles: calibrated models, PPW-optimal clocks, tuning caches.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(profile_app, name="profile")


@profile_app.command("list")
def list_command(json_out: JsonOpt = False) -> None:
    """List the profiles governor can see (yours first, then the shipped ones)."""
    from governor.profiles.profile import list_profiles

    rows = list_profiles()
    if json_out:
        emit_json({"profiles": rows})
        return
    from rich.table import Table

    from governor.cli.common import console as console_

    table = Table(title="Profiles")
    for col in ("board", "PPW-optimal MHz", "ridge MHz", "loads", "source", "path"):
        table.add_column(col)
    for r in rows:
        opt = r.get("ppw_optimal_clock_mhz")
        ridge = r.get("ridge_clock_mhz")
        table.add_row(
            r["board"] + (" (overridden)" if r["overridden"] else ""),
            "-" if opt is None else f"{opt:g}",
            "-" if ridge is None else f"{ridge:.0f}",
            ", ".join(r.get("workloads", [])) or r.get("error", "-"),
            r["source"],
            r["path"],
        )
    console_().print(table)


@profile_app.command("show")
def show_command(
    board: Annotated[
        Optional[str], typer.Argument(help="Board name (agx-orin) or a profile file.")
    ] = None,
    device: Annotated[
        Optional[str],
        typer.Option(
            "--device", "-d", help="Show the profile for this device, checking it matches."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Accept a profile made on another board.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show one profile: by board name, by file, or for a device (checked against its fingerprint)."""
    from governor.errors import InvalidRequestError, ProfileError
    from governor.profiles.profile import find_profile, load_profile_for, validate
    from governor.profiles.store import profile_paths, read_profile_file

    warnings: List[str] = []
    if device:
        from governor.devices.registry import open_device

        with open_device(device) as dev:
            path, doc, warnings = load_profile_for(dev, force=force)
    elif board is None:
        raise InvalidRequestError(
            "name a board (governor profile show agx-orin), a file, or --device URI"
        )
    elif board.endswith(".json") or "/" in board:
        path = Path(board)
        doc = validate(read_profile_file(path), path)
    else:
        found = find_profile(board)
        if found is None:  # perhaps only tuning caches (tiles, blocks) so far
            cache = next((p for p in profile_paths(board) if p.exists()), None)
            if cache is None:
                raise ProfileError(
                    f"no profile for board {board!r}: run 'governor calibrate' on it first"
                )
            found = (cache, read_profile_file(cache))
        path, doc = found
    if json_out:
        emit_json({"path": str(path), "warnings": warnings, "profile": doc})
        return
    from governor.cli.common import console as console_

    console = console_()
    console.print(f"[bold]{doc.get('board', path.stem)}[/bold]  ({path})")
    best_probe = doc.get("method") == "best-probe"
    if "ppw_optimal_clock_mhz" not in doc or ("power_model" not in doc and not best_probe):
        console.print("  not calibrated yet: run 'governor calibrate' on this board")
        _print_tuning(console, doc)
        return
    pm = doc.get("power_model")
    ridge = doc.get("ridge_clock_mhz")
    console.print(
        f"  PPW-optimal clock  {doc['ppw_optimal_clock_mhz']:g} MHz"
        + (f"   ridge {ridge:.0f} MHz" if ridge is not None else "")
    )
    if pm is None:
        console.print(
            f"  method             best-probe: no model explained the {len(doc.get('probes') or [])} "
            "measured probes; the best one is the answer"
        )
    else:
        console.print(
            f"  power model        P = min({pm.get('p_max_w') or 'inf'}, {pm['p_idle_w']:.2f} + {pm['alpha_w_per_mhz']:.4g}·f·V²), "
            f"V = 1 + {pm['beta_per_mhz']:.3g}·(f − {pm['ridge_clock_mhz']:.0f})₊"
        )
    console.print(
        f"  calibrated         {doc.get('created', '?')} with loads: {', '.join(sorted(doc.get('workloads', {})))}"
    )
    _print_tuning(console, doc)
    for w in warnings:
        console.print(f"  warning: {w}")


def _print_tuning(console, doc) -> None:
    for key, section in sorted((doc.get("tuning") or {}).items()):
        console.print(
            f"  tuning cache       {key}: {len(section)} entr{'y' if len(section) == 1 else 'ies'}"
        )


@profile_app.command("import")
def import_command(
    file: Annotated[Path, typer.Argument(help="A profile JSON file (e.g. from another machine).")],
    device: Annotated[str, typer.Option("--device", "-d", help="The device it is for.")] = "auto",
    force: Annotated[
        bool, typer.Option("--force", help="Accept a profile made on another board.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Install a profile for a device, refusing one made on another board unless forced."""
    from governor.devices.registry import open_device
    from governor.profiles.profile import board_key, check_fingerprint, validate
    from governor.profiles.schema import check_clocks_for
    from governor.profiles.store import profile_paths, read_profile_file, write_profile_file

    doc = validate(read_profile_file(file), file)
    with open_device(device) as dev:
        warnings = check_fingerprint(doc, dev, file, force=force)
        check_clocks_for(doc, dev.supported_clocks_mhz(), file)
        target = profile_paths(board_key(dev))[0]
        doc = dict(doc, board=board_key(dev))
        write_profile_file(target, doc)
    if json_out:
        emit_json({"path": str(target), "warnings": warnings})
    else:
        typer.echo(f"installed {file} as {target}")
        for w in warnings:
            typer.echo(f"warning: {w}", err=True)
