"""Running the CLI in-process, as the tests of every command do."""

from __future__ import annotations

import pytest


def run_cli(capsys, *args):
    """Run ``governor ARGS``; returns (exit code, stdout, stderr)."""
    from governor.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err
