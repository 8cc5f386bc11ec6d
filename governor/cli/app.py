"""Assembles the typer application from one module per command (or noun)."""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any, Callable, Iterator, Optional

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
    "governor.cli.kernels",
    "governor.cli.apply",
    "governor.cli.run",
    "governor.cli.ros2",
    "governor.cli.simulate",
    "governor.cli.daemon",
    "governor.cli.exporter",
    "governor.cli.slurm",
    "governor.cli.cluster",
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
        # Help text is plain text: rich markup would swallow "[kernel.NAME]" and any other
        # word in square brackets.
        rich_markup_mode=None,
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
    evaluate_annotations(app)
    return app


def _callbacks(app: typer.Typer) -> Iterator[Callable[..., Any]]:
    """Every function typer will read parameters from: commands, callbacks, sub-apps'."""
    info = app.registered_callback
    if info is not None and info.callback is not None:
        yield info.callback
    for command in app.registered_commands:
        if command.callback is not None:
            yield command.callback
    for group in app.registered_groups:
        if group.callback is not None:
            yield group.callback
        if group.typer_instance is not None:
            yield from _callbacks(group.typer_instance)


def evaluate_annotations(app: typer.Typer) -> None:
    """Evaluate the commands' string annotations in place, before Python 3.10.

    The CLI modules use ``from __future__ import annotations``; before 3.10 typer reads the
    signature without evaluating the strings, so ``Annotated[bool, typer.Option("--json")]``
    is lost and every option falls back to its parameter's name (``--json-out`` for
    ``json_out``): on JetPack 5's Python 3.8 half the documented options did not exist.
    """
    if sys.version_info >= (3, 10):
        return
    if sys.version_info >= (3, 9):
        from typing import get_type_hints
    else:  # pragma: no cover - Python 3.8
        from typing_extensions import get_type_hints
    for func in _callbacks(app):
        if not inspect.isfunction(func):  # typer's DefaultPlaceholder where none was given
            continue
        func.__annotations__ = get_type_hints(func, include_extras=True)
