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


def main(argv: Optional[List[str]] = None) -> None:
    """Entry point of the console script; exits with the command's status."""
    import click

    from governor.cli.app import build_app
    from governor.cli.common import report_error
    from governor.errors import GovernorError

    args = list(sys.argv[1:] if argv is None else argv)
    wants_json = "--json" in args
    app = build_app()
    try:
        result = app(args=args, prog_name="governor", standalone_mode=False)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        report_error("interrupted", wants_json)
        sys.exit(130)
    except click.ClickException as err:
        report_error(err.format_message(), wants_json)
        sys.exit(err.exit_code)
    except GovernorError as err:
        report_error(str(err), wants_json)
        sys.exit(1)
    except KeyboardInterrupt:
        report_error("interrupted", wants_json)
        sys.exit(130)
    except Exception as err:  # a bug: still one line unless asked for more
        if os.environ.get("GOVERNOR_DEBUG"):
            raise
        report_error(
            f"internal error: {type(err).__name__}: {err} (set GOVERNOR_DEBUG=1 for the traceback)",
            wants_json,
        )
        sys.exit(1)
    sys.exit(result if isinstance(result, int) else 0)
