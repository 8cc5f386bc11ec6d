"""Assembles the typer application from one module per command (or noun)."""

from __future__ import annotations

import importlib
from typing import Optional

import typer

from governor._version import __version__
from governor.cli.common import Annotated

# Each module defines ``register(app)``; listed in the order ``--help`` shows them.
COMMAND_MODULES = (
    "governor.cli.calibrate",
    "governor.cli.profile",
    "governor.cli.devices",
    "governor.cli.doctor",
    "governor.cli.monitor",
    "governor.cli.tegrastats",
    "governor.cli.tiles",
    "governor.cli.tiles_calibrate",
    "governor.cli.occupancy",
    "governor.cli.tune_blocks",
    "governor.cli.apply",
    "governor.cli.run",
    "governor.cli.ros2",
    "governor.cli.simulate",
    "governor.cli.daemon",
    "governor.cli.exporter",
    "governor.cli.slurm",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"governor {__version__}")
        raise typer.Exit()


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="governor",
        help="Make GPUs do more work per joule: calibrate, tune and govern clocks.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root(
        version: Annotated[
            Optional[bool],
            typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
        ] = None,
    ) -> None:
        """Make GPUs do more work per joule: calibrate, tune and govern clocks."""

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app
