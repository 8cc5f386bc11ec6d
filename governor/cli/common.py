"""Helpers shared by the CLI commands: JSON output, errors, the common options."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import typer

from governor._compat import Annotated

__all__ = [
    "Annotated",
    "DeviceOpt",
    "JsonOpt",
    "console",
    "emit_json",
    "report_error",
    "to_jsonable",
]

#: the width of output that goes to a pipe or a file, where no terminal says how wide it is:
#: rich's 80 columns cut URIs (sim:xavier…) and wrapped lines a script reads
PIPE_WIDTH = 200

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
DeviceOpt = Annotated[
    str,
    typer.Option(
        "--device",
        "-d",
        envvar="GOVERNOR_DEVICE",
        help="Device URI: auto, sim:NAME, twin:PATH, replay:PATH, nvml:N, jetson, jtop, tegrastats; "
        "where a command says so, also 'all' (every GPU of this host) or URI,URI.",
    ),
]


def to_jsonable(value: Any) -> Any:
    """Turn dataclasses, tuples, sets, numpy scalars and non-finite floats into plain JSON."""
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict())
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return to_jsonable(value.item())
    return value


def emit_json(document: Any) -> None:
    """Write one JSON document (or one JSON line) to stdout."""
    sys.stdout.write(json.dumps(to_jsonable(document)) + "\n")
    sys.stdout.flush()


def report_error(message: str, wants_json: bool) -> None:
    """One line on stderr, and ``{"error": ...}`` on stdout for --json callers."""
    line = " ".join(str(message).split())
    sys.stderr.write(f"governor: error: {line}\n")
    if wants_json:
        emit_json({"error": line})


def console(*, stderr: bool = False, highlight: bool = False) -> Any:
    """A rich console for a command's tables and lines: the terminal's width on a terminal;
    on a pipe or a file ``COLUMNS`` if set, else :data:`PIPE_WIDTH`, so nothing is cut or
    wrapped at 80 columns."""
    import os

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty():
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
    return Console(stderr=stderr, highlight=highlight, width=width)
