"""``governor monitor``: live telemetry, as a table or JSON lines."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List, Optional

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
    mcap: Annotated[
        Optional[Path],
        typer.Option(
            "--mcap",
            help="Also record each sample as ROS 2 messages (/diagnostics, /governor/power) "
            "to this MCAP file; needs no ROS install.",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Print telemetry from a device: power per rail, clocks, temperature, energy.

    Simulated boards run on virtual time: with --count the samples come at once, each
    --interval-s apart in device time; without it they come in real time. With --mcap the
    recording's times are wall-clock: virtual time is laid out from the wall-clock start.
    A sample that cannot be read (a GPU lost, a driver timing out) is skipped and said once on
    stderr until the device answers again; the others go on.
    """
    import contextlib

    from governor.devices.base import WorkloadDevice
    from governor.devices.registry import last_auto_note, open_device, resolve_uris
    from governor.errors import GovernorError, InvalidRequestError

    uris = resolve_uris(device)
    with contextlib.ExitStack() as stack:
        devs = []
        for uri in uris:
            dev = open_device(uri)
            stack.callback(dev.close)
            devs.append(dev)
        if device == "auto" and last_auto_note():
            typer.echo(f"governor: {last_auto_note()}", err=True)
        if workload is not None:
            for dev in devs:
                if not isinstance(dev, WorkloadDevice):
                    raise InvalidRequestError("--workload applies to simulated boards only")
                dev.run_workload(workload)
        record = None
        if mcap is not None:
            from governor.ros2.recording import Recorder

            recorder = Recorder(mcap)
            stack.callback(recorder.close)  # also on Ctrl-C: the file stays readable
            record = _mcap_writer(recorder, devs)
        tables = {} if json_out else {dev.uri: _Table(dev) for dev in devs}
        several = len(devs) > 1
        failing: Dict[str, str] = {}  # device -> the error of its current failed episode
        n = 0
        while count is None or n < count:
            if n:
                for dev in devs:  # each simulated board keeps its own virtual time
                    if dev.clock.virtual:
                        dev.clock.sleep(interval_s)
                if count is None or not all(dev.clock.virtual for dev in devs):
                    time.sleep(interval_s)  # real time passes once for every device
            for dev in devs:
                try:
                    sample = dev.sample()
                except GovernorError as err:
                    if dev.uri not in failing:
                        typer.echo(
                            f"governor: {err}; skipping its samples until it answers", err=True
                        )
                    failing[dev.uri] = str(err)
                    continue
                if failing.pop(dev.uri, None) is not None:
                    typer.echo(f"governor: {dev.uri} answers again", err=True)
                if record is not None:
                    record(dev, sample)
                if json_out:
                    emit_json(dict(sample.to_dict(), device=dev.uri))
                else:
                    tables[dev.uri].row(sample, label=dev.uri if several else None)
            n += 1


def _mcap_writer(recorder, devs):
    """A function writing one sample of a device as the node's messages would carry it."""
    from governor.ros2 import telemetry
    from governor.ros2.recording import TimeBase

    bases = {dev.uri: TimeBase(dev.clock.now_s()) for dev in devs}

    def record(dev, sample) -> None:
        ns = bases[dev.uri].ns(sample.t_s)
        status = telemetry.device_status(dev, sample, policy="none (monitor)")
        recorder.write(
            "/diagnostics",
            telemetry.DIAGNOSTIC_ARRAY,
            telemetry.diagnostic_array(ns, [status]),
            ns,
        )
        if sample.power_w is not None:
            recorder.write(
                "/governor/power", telemetry.FLOAT64, telemetry.power_message(sample.power_w), ns
            )

    return record


class _Table:
    """Plain aligned rows (works in pipes and logs, unlike a live-updating widget)."""

    def __init__(self, dev) -> None:
        from governor.cli.common import console as console_

        self.console = console_()
        self.names: Optional[List[str]] = None
        self.console.print(f"[bold]{dev.identity.name}[/bold] ({dev.uri})")

    def row(self, s, label=None) -> None:
        if self.names is None:
            self.names = [r.name for r in s.rails]
            head = ["t_s", "clock_mhz", "mem_clock_mhz", "power_w", "scope", "temp_c", "energy_j"]
            head += self.names
            self.console.print("  ".join(f"{h:>12}" for h in head), soft_wrap=True)

        def fmt(v, spec=".2f"):
            return "-" if v is None else format(v, spec)

        cells = [
            fmt(s.t_s, ".1f"),
            fmt(s.gpu_clock_mhz, ".1f"),
            fmt(s.mem_clock_mhz, ".1f"),
            fmt(s.power_w),
            s.power_scope or "-",
            fmt(s.temperature_c, ".1f"),
            fmt(s.energy_j, ".1f"),
        ]
        cells += [fmt(r.power_w) for r in s.rails]
        if label:
            cells.append(label)
        self.console.print("  ".join(f"{c:>12}" for c in cells), soft_wrap=True)
