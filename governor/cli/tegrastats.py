"""``governor tegrastats parse|summarize FILE``: read a tegrastats log without a board."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import typer

from governor.cli import values
from governor.cli.common import Annotated, JsonOpt, emit_json

__all__ = ["register"]

app = typer.Typer(
    name="tegrastats",
    help="Turn a tegrastats log into per-rail power and energy, and GPU load and clocks.",
    no_args_is_help=True,
)

FileArg = Annotated[Path, typer.Argument(help="A tegrastats log ('-' for standard input).")]


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="tegrastats")


def _lines(path: Path) -> Iterator[str]:
    from governor.errors import InvalidRequestError

    if str(path) == "-":
        import sys

        yield from sys.stdin
        return
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from fh
    except OSError as err:
        raise InvalidRequestError(f"cannot read {path}: {err.strerror or err}") from err


@app.command("parse")
def parse(file: FileArg, json_out: JsonOpt = False) -> None:
    """Print each sample of the log (one JSON line per sample with --json)."""
    from governor.devices.tegrastats.parser import TegrastatsParser

    parser = TegrastatsParser()
    for line in _lines(file):
        sample = parser.feed(line)
        if sample is None:
            continue
        if json_out:
            emit_json(sample.to_dict())
        else:
            rails = " ".join(f"{n}={r.power_w:.3f}W" for n, r in sample.rails.items())
            load = "-" if sample.gpu_load_pct is None else f"{sample.gpu_load_pct:g}%"
            clock = "-" if sample.gpu_clock_mhz is None else f"{sample.gpu_clock_mhz:g}MHz"
            typer.echo(f"gpu {load} @ {clock}  {rails}")
    if not json_out:
        typer.echo(f"{parser.samples} samples, {parser.skipped_lines} lines skipped", err=True)


@app.command("summarize")
def summarize(
    file: FileArg,
    interval_ms: Annotated[
        float,
        typer.Option(
            "--interval-ms",
            callback=values.number(ge=1e-3, le=values.HOUR_S * 1000, unit="ms"),
            help="Sampling interval of the log (tegrastats --interval), ms; used only when "
            "its lines carry no timestamps.",
        ),
    ] = 1000.0,
    json_out: JsonOpt = False,
) -> None:
    """Per-rail time-weighted mean and max power (W) and energy (J), GPU mean load and clock
    range; times from the log's timestamps, else from --interval-ms."""
    from governor.devices.tegrastats.summary import summarize_lines

    doc = summarize_lines(_lines(file), interval_ms)
    if json_out:
        emit_json(doc)
        return
    typer.echo(
        f"{doc['samples']} samples over {doc['duration_s']:g} s (timing from {doc['timing']}, "
        f"{doc['skipped_lines']} lines skipped)"
    )
    for name, r in doc["rails"].items():
        typer.echo(
            f"  {name:<18} mean {r['mean_w']:8.3f} W   max {r['max_w']:8.3f} W   energy {r['energy_j']:10.3f} J"
        )
    gpu = doc["gpu"]
    load = "-" if gpu["mean_load_pct"] is None else f"{gpu['mean_load_pct']:.1f} %"
    lo, hi = gpu["clock_mhz"]["min"], gpu["clock_mhz"]["max"]
    clocks = "-" if lo is None else f"{lo:g}-{hi:g} MHz"
    typer.echo(f"  GPU mean load {load}, clock {clocks}")
