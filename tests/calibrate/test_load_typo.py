"""A load that can never run is refused before any probe, with the close name of a built-in
load (issue 49: ``--load memroy`` used to advise ``?realtime=1``)."""

from __future__ import annotations

from cli_helpers import run_cli

from governor.paths import data_dir


def test_a_typo_of_a_builtin_load_names_the_builtin_and_calibrates_nothing(capsys):
    code, out, err = run_cli(capsys, "calibrate", "--device", "sim:nano", "--load", "memroy")
    assert code == 1 and out == ""
    (line,) = err.strip().splitlines()[-1:]
    assert "unknown load 'memroy'; did you mean memory?" in line
    assert "realtime" not in err
    assert not list(data_dir().rglob("*.json"))  # nothing was probed or saved


def test_a_command_whose_program_is_not_on_path_is_refused_up_front(capsys):
    code, _out, err = run_cli(
        capsys, "calibrate", "--device", "sim:nano?realtime=1", "--load", "no-such-prog --fast"
    )
    assert code == 1
    assert "'no-such-prog' is no program on PATH" in err and "did you mean" not in err
