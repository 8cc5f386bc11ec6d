"""The kernel-configuration surface a robot app meets (issue 49): a typo of a kernel or an
unknown precision is refused with the known names, the hint for a missing table is a command
that works as printed, and a profile holding only tables is not called missing."""

from __future__ import annotations

import logging
import shlex

import pytest
from cli_helpers import run_cli

import governor
from governor.errors import InvalidRequestError
from governor.profiles.store import profile_paths, put_tuning
from governor.runtime import Governor


@pytest.fixture
def held():
    with governor.open_device("sim:xavier-nx") as dev:
        with Governor(dev, policy={"policy": "max"}, background=False) as gov:
            gov.step()
            yield gov


def test_a_typo_and_an_unknown_precision_are_refused_with_the_known_names(held):
    with pytest.raises(InvalidRequestError, match=r"did you mean jacobi-2d\?.*conv-2d, gemm"):
        held.kernel_config("jacobi2d")
    with pytest.raises(InvalidRequestError, match="double or single, not 'half'"):
        held.kernel_config("jacobi-2d", precision="half")


def test_the_hint_for_a_missing_table_is_a_command_that_works_as_printed(held, capsys):
    _config, reason = held.kernel_config("jacobi-2d", precision="single")
    command = reason.split("(run '", 1)[1].split("')", 1)[0]
    assert "--precision single" in command
    args = shlex.split(command)
    assert args[:3] == ["governor", "kernels", "table"]
    code, _out, err = run_cli(capsys, *args[1:], "--help")  # the options parse as printed
    assert code in (0, None), err


def test_a_profile_with_only_tuning_tables_is_not_called_missing(caplog):
    put_tuning("xavier-nx", "kernel-table", "jacobi-2d/double", {"rows": []})
    assert profile_paths("xavier-nx")[0].exists()
    with caplog.at_level(logging.INFO):
        with governor.open_device("sim:xavier-nx") as dev:
            with Governor(dev, policy={"policy": "max"}, background=False) as gov:
                gov.step()
    said = caplog.text
    assert "no profile for" not in said
    assert "holds tuning tables but no calibration" in said
