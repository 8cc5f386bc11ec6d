"""One set of board names (issue 49): a board's device URI (``sim:NAME``) is accepted wherever
a board is asked for, a typo gets the close names, and a device named by GOVERNOR_DEVICE says
so in its error."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

from governor.names import close_names, did_you_mean

BOARDS = ["agx-orin", "agx-xavier", "nano", "orin-nano", "orin-nx", "xavier-nx", "t4"]


def test_close_names_prefer_the_same_spelling_then_containment_then_near_spellings():
    assert close_names("xavier_nx", BOARDS) == ["xavier-nx"]
    assert close_names("AGX-Orin", BOARDS) == ["agx-orin"]
    assert set(close_names("orin", BOARDS)) == {"agx-orin", "orin-nano", "orin-nx"}
    assert close_names("agx-orni", BOARDS) == ["agx-orin"]
    assert close_names("foo", BOARDS) == []
    assert did_you_mean("foo", BOARDS) == ""
    assert did_you_mean("agx-orni", BOARDS, prefix="sim:") == "; did you mean sim:agx-orin?"
    assert did_you_mean("xavier", BOARDS) == "; did you mean xavier-nx or agx-xavier?"


def _one_line_error(capsys, *args):
    code, out, err = run_cli(capsys, *args)
    assert code not in (0, None), out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("governor: error: "), err
    return lines[0]


def test_a_board_name_given_as_a_device_suggests_its_uri(capsys):
    line = _one_line_error(capsys, "devices", "-d", "agx-orin")
    assert "did you mean sim:agx-orin?" in line


def test_the_environment_variable_is_named_when_the_device_came_from_it(capsys, monkeypatch):
    monkeypatch.setenv("GOVERNOR_DEVICE", "sim:orin")
    line = _one_line_error(capsys, "calibrate")
    assert line.startswith("governor: error: GOVERNOR_DEVICE=sim:orin: unknown simulated board")
    assert "did you mean" in line and "orin-nx" in line
    line = _one_line_error(capsys, "calibrate", "--device", "sim:orni")  # the flag wins
    assert "GOVERNOR_DEVICE" not in line and "did you mean" in line


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--board", "sim:xavier-nx", "--duration-s", "2", "--json"],
        ["tiles", "gemm", "--board", "sim:xavier-nx", "--json"],
        ["tiles", "gemm", "--gpu", "sim:agx-orin", "--json"],
    ],
    ids=["simulate", "tiles-board", "tiles-gpu"],
)
def test_a_board_may_be_spelt_as_its_device_uri(capsys, args):
    code, out, err = run_cli(capsys, *args)
    assert code in (0, None), err
    json.loads(out)


def test_a_board_typo_suggests_the_close_board(capsys):
    line = _one_line_error(capsys, "tiles", "gemm", "--board", "xavier_nx")
    assert "did you mean xavier-nx?" in line
    # every catalog board has its EATSS description now (tests/tuning/test_catalog_gpus.py)
    line = _one_line_error(capsys, "tiles", "gemm", "--gpu", "nanoo")
    assert "unknown GPU 'nanoo'; did you mean nano or orin-nano?" in line
    line = _one_line_error(capsys, "simulate", "--board", "xavier")
    assert "did you mean xavier-nx or agx-xavier?" in line
