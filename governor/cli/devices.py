"""``governor devices``: what is here, what it can do, and whether we may change it."""

from __future__ import annotations

from typing import Optional

import typer

from governor.cli.common import Annotated, JsonOpt, emit_json


def register(app: typer.Typer) -> None:
    app.command("devices")(devices)


def devices(
    json_out: JsonOpt = False,
    simulated: Annotated[
        bool, typer.Option("--simulated", help="Also describe every simulated board.")
    ] = False,
    device: Annotated[
        Optional[str],
        typer.Option(
            "--device", "-d", help="Describe only these: URI, URI,URI or all (the default)."
        ),
    ] = None,
) -> None:
    """List GPUs found (capabilities, whether control is permitted) and the simulated boards.

    MIG instances are listed under their GPU; their power is the whole GPU's.
    """
    from governor.devices.registry import list_devices, resolve_uris, simulated_boards

    uris = None if device in (None, "all") else resolve_uris(device)
    rows = list_devices(include_simulated=simulated, uris=uris)
    boards = list(simulated_boards())
    if json_out:
        emit_json({"devices": rows, "simulated_boards": boards})
        return
    from rich.table import Table

    from governor.cli.common import console as console_

    console = console_()
    real = [r for r in rows if r["kind"] != "sim"]
    if not real:
        console.print("No GPU found on this machine. Simulated boards work everywhere: sim:NAME")
    if rows:
        table = Table(title="Devices")
        for column in (
            "URI",
            "name",
            "clocks (MHz)",
            "memory (MHz)",
            "can read",
            "can set",
            "control",
        ):
            table.add_column(column)
        for r in rows:
            caps = r["capabilities"]
            reads = [
                k
                for k in (
                    "power",
                    "energy_counter",
                    "rails",
                    "gpu_clock",
                    "mem_clock",
                    "temperature",
                    "utilisation",
                    "throttle_reasons",
                )
                if caps.get(k)
            ]
            sets = [
                k
                for k in ("lock_gpu_clocks", "lock_mem_clock", "power_limit", "power_mode")
                if caps.get(k)
            ]
            clocks = r["supported_clocks_mhz"]
            span = f"{clocks[0]:g}-{clocks[-1]:g} ({len(clocks)})" if clocks else "-"
            mems = r.get("supported_mem_clocks_mhz") or []
            mem_span = ", ".join(f"{m:g}" for m in mems) if mems else "-"
            control = "yes" if r["can_control"] else (r.get("control_reason") or "no")
            table.add_row(
                r["uri"],
                r["name"],
                span,
                mem_span,
                ", ".join(reads),
                ", ".join(sets) or "-",
                control,
            )
            for part in r.get("parts") or []:
                table.add_row(
                    "  " + part["uri"],
                    part["name"],
                    "",
                    "",
                    f"power: {part['power_scope']}",
                    "-",
                    "-",
                )
        console.print(table)
    console.print("Simulated boards: " + ", ".join(boards))
