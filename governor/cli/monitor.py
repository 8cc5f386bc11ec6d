"""``governor monitor``: live telemetry, as a table or JSON lines."""

from __future__ import annotations

import time
from typing import Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, DeviceOpt, JsonOpt, emit_json


def register(app: typer.Typer) -> None:
    app.command("monitor")(monitor)


def monitor(
    device: DeviceOpt = "auto",
    count: Annotated[
        Optional[int],
        typer.Option(
            "--count", "-n", callback=values.count(le=1_000_000), help="Stop after N samples."
        ),
    ] = None,
    interval_s: Annotated[
        float,
        typer.Option(
            "--interval-s",
            callback=values.number(ge=0.01, le=values.HOUR_S, unit="seconds"),
            help="Seconds between samples.",
        ),
    ] = 0.5,
    workload: Annotated[
        Optional[str],
        typer.Option(
            "--workload", help="Simulated boards only: run this workload (compute, memory, ...)."
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Print telemetry from a device: power per rail, clocks, temperature, energy.

    Simulated boards run on virtual time: with --count the samples come at once, each
    --interval-s apart in device time; without it they come in real time.
    """
    from governor.devices.registry import last_auto_note, open_device
    from governor.errors import InvalidRequestError

    dev = open_device(device)
    with dev:
        if device == "auto" and last_auto_note():
            typer.echo(f"governor: {last_auto_note()}", err=True)
        if workload is not None:
            if not hasattr(dev, "run_workload"):
                raise InvalidRequestError("--workload applies to simulated boards only")
            dev.run_workload(workload)
        table = None if json_out else _Table(dev)
        n = 0
        while count is None or n < count:
            if n:
                dev.clock.sleep(interval_s)
                if dev.clock.virtual and count is None:
                    time.sleep(interval_s)
            sample = dev.sample()
            if json_out:
                emit_json(sample.to_dict())
            else:
                table.row(sample)
            n += 1


class _Table:
    """Plain aligned rows (works in pipes and logs, unlike a live-updating widget)."""

    def __init__(self, dev) -> None:
        from rich.console import Console

        self.console = Console(highlight=False)
        self.names = None
        self.console.print(f"[bold]{dev.identity.name}[/bold] ({dev.uri})")

    def row(self, s) -> None:
        if self.names is None:
            self.names = [r.name for r in s.rails]
            head = ["t_s", "clock_mhz", "power_w", "scope", "temp_c", "energy_j"] + self.names
            self.console.print("  ".join(f"{h:>12}" for h in head), soft_wrap=True)

        def fmt(v, spec=".2f"):
            return "-" if v is None else format(v, spec)

        cells = [
            fmt(s.t_s, ".1f"),
            fmt(s.gpu_clock_mhz, ".1f"),
            fmt(s.power_w),
            s.power_scope or "-",
            fmt(s.temperature_c, ".1f"),
            fmt(s.energy_j, ".1f"),
        ]
        cells += [fmt(r.power_w) for r in s.rails]
        self.console.print("  ".join(f"{c:>12}" for c in cells), soft_wrap=True)
