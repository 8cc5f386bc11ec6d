"""The ``governor`` command: thin typer commands over the Python API.

Every command takes ``--json`` (one JSON document on stdout, diagnostics on stderr). Errors
are one line on stderr with exit code 1 (2 for usage errors); with ``--json`` the same
message also goes to stdout as ``{"error": "..."}``. Set ``GOVERNOR_DEBUG=1`` to see the
traceback of an unexpected error.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

__all__ = ["main"]


def _is(err: BaseException, name: str) -> bool:
    """Whether ``err`` is click's (or typer's vendored click's) exception class ``name``."""
    return any(cls.__name__ == name for cls in type(err).__mro__)


def _from_environment(message: str, own: List[str]) -> str:
    """Name ``GOVERNOR_DEVICE`` when the device the message is about came from it (no
    ``--device`` on the command line): otherwise a typo in the environment reads like one
    on the command line that is not there."""
    value = os.environ.get("GOVERNOR_DEVICE", "").strip()
    if not value or any(a in ("-d", "--device") or a.startswith("--device=") for a in own):
        return message
    if value in message or value.partition(":")[2] in message:
        return f"GOVERNOR_DEVICE={value}: {message}"
    return message


def _remedy(err: BaseException) -> str:
    """What fixes an error the command itself cannot: a corrupt profile is set aside by a new
    calibration (the calibrate command says so itself when it meets one)."""
    from governor.profiles.store import CorruptProfileError

    if isinstance(err, CorruptProfileError):
        return (
            "; 'governor calibrate' on that board sets it aside and writes a new one "
            "(or remove the file)"
        )
    return ""


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point of the console script; exits with the command's status."""
    from governor.cli.app import build_app
    from governor.cli.common import report_error
    from governor.errors import GovernorError

    args = list(sys.argv[1:] if argv is None else argv)
    own = args[: args.index("--")] if "--" in args else args  # not the job's own --json
    wants_json = "--json" in own
    app = build_app()
    try:
        result = app(args=args, prog_name="governor", standalone_mode=False)
    except GovernorError as err:
        report_error(_from_environment(str(err), own) + _remedy(err), wants_json)
        sys.exit(1)
    except KeyboardInterrupt:
        report_error("interrupted", wants_json)
        sys.exit(130)
    except Exception as err:
        if _is(err, "Exit"):
            sys.exit(getattr(err, "exit_code", 0))
        if _is(err, "Abort"):
            report_error("interrupted", wants_json)
            sys.exit(130)
        if _is(err, "ClickException"):  # usage errors: bad option, missing argument
            report_error(err.format_message(), wants_json)  # type: ignore[attr-defined]
            sys.exit(getattr(err, "exit_code", 2))
        if os.environ.get("GOVERNOR_DEBUG"):
            raise
        report_error(
            f"internal error: {type(err).__name__}: {err} (set GOVERNOR_DEBUG=1 for the traceback)",
            wants_json,
        )
        sys.exit(1)
    sys.exit(result if isinstance(result, int) else 0)
