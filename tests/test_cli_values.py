"""Every number the command line takes is checked before the command starts.

A bad value (inf, nan, negative, zero where a count or a period is meant, or far too large)
is a usage error: exit code 2, one line on stderr naming the option, no traceback, nothing
run. The checks live in ``governor.cli.values``; the last tests walk the whole command tree
so that an option added later cannot skip them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import pytest
import typer
from cli_helpers import run_cli

from governor.cli import values
from governor.cli.app import evaluate_annotations
from governor.cli.common import Annotated

# (command line up to the option, option, bad values, what the message says); each bad
# value is tried on its own. Values typer cannot parse for an int option (inf, 1.5) are
# refused by typer itself, also as a one-line usage error naming the option.
FLOATS = ("inf", "-inf", "nan")
SIM = ["--device", "sim:agx-orin"]
RUN_TAIL = ["--", "true"]

TABLE: List[Tuple[List[str], str, Sequence[str], str, List[str]]] = [
    # calibrate
    (["calibrate", "--device", "sim:t4", "--no-save"], "--window-s",
     (*FLOATS, "-1", "0", "3601", "1e308"),
     "--window-s must be a finite number of seconds > 0 and <= 3600", []),
    (["calibrate", "--device", "sim:t4", "--no-save"], "--max-probes", ("-1", "0", "3", "1001"),
     "--max-probes must be a whole number >= 4 and <= 1000", []),
    (["calibrate", "--device", "sim:t4", "--no-save"], "--max-probes", ("inf", "nan", "4.5"),
     "--max-probes", []),
    # monitor
    (["monitor", *SIM], "--interval-s", (*FLOATS, "-1", "0", "0.001", "3601"),
     "--interval-s must be a finite number of seconds >= 0.01 and <= 3600", []),
    (["monitor", *SIM], "--count", ("-1", "0", "1000001"),
     "--count must be a whole number >= 1 and <= 1000000", []),
    (["monitor", *SIM], "-n", ("0",), "--count must be a whole number >= 1", []),
    (["monitor", *SIM], "--count", ("inf", "nan"), "--count", []),
    # run: the policy's numbers come from governor.runtime.policies.LIMITS
    (["run", *SIM, "--policy", "power-cap"], "--cap-w", (*FLOATS, "-5", "0", "1e308"),
     "--cap-w must be a finite number of W > 0 and <= 100000", RUN_TAIL),
    (["run", *SIM, "--policy", "battery", "--hours", "1"], "--battery-wh",
     (*FLOATS, "-5", "0", "1e7"),
     "--battery-wh must be a finite number of Wh > 0 and <= 1000000", RUN_TAIL),
    (["run", *SIM, "--policy", "battery", "--battery-wh", "10"], "--hours",
     (*FLOATS, "-1", "0", "8761"),
     "--hours must be a finite number of hours > 0 and <= 8760", RUN_TAIL),
    (["run", *SIM], "--rate-hz", (*FLOATS, "-30", "0", "1e7"),
     "--rate-hz must be a finite number of Hz > 0 and <= 1000000", RUN_TAIL),
    (["run", *SIM, "--policy", "clock"], "--clock", (*FLOATS, "-900", "0", "1e308"),
     "--clock must be a finite number of MHz > 0 and <= 100000", RUN_TAIL),
    (["run", *SIM], "--interval-s", (*FLOATS, "-1", "0", "0.0001", "61"),
     "--interval-s must be a finite number of seconds >= 0.001 and <= 60", RUN_TAIL),
    # simulate
    (["simulate"], "--duration-s", (*FLOATS, "-5", "0", "604801", "1e308"),
     "--duration-s must be a finite number of seconds > 0 and <= 604800", []),
    (["simulate"], "--interval-s", (*FLOATS, "-1", "0", "61"),
     "--interval-s must be a finite number of seconds >= 0.001 and <= 60", []),
    (["simulate", "--policy", "power-cap"], "--cap-w", (*FLOATS, "-1", "0", "1e308"),
     "--cap-w must be a finite number of W > 0", []),
    (["simulate", "--policy", "battery", "--hours", "1"], "--battery-wh", ("nan", "-1"),
     "--battery-wh must be a finite number of Wh > 0", []),
    (["simulate", "--policy", "battery", "--battery-wh", "5"], "--hours", ("0", "inf"),
     "--hours must be a finite number of hours > 0", []),
    (["simulate", "--policy", "throughput"], "--rate-hz", ("-30", "nan"),
     "--rate-hz must be a finite number of Hz > 0", []),
    (["simulate", "--policy", "clock"], "--clock", ("nan", "0"),
     "--clock must be a finite number of MHz > 0", []),
    (["simulate"], "--seed", ("-1", "2147483648"),
     "--seed must be a whole number >= 0 and <= 2147483647", []),
    (["simulate"], "--seed", ("nan", "1.5"), "--seed", []),
    # apply
    (["apply", *SIM], "--clock", (*FLOATS, "-1", "0", "1e308"),
     "--clock must be a finite number of MHz > 0 and <= 100000", []),
    (["apply", *SIM], "--power-limit", (*FLOATS, "-1", "0", "1e308"),
     "--power-limit must be a finite number of W > 0 and <= 100000", []),
    # tiles (EATSS)
    (["tiles", "gemm", "--gpu", "a100"], "--shared-fraction", (*FLOATS, "-0.1", "1.5"),
     "--shared-fraction must be a finite number >= 0 and <= 1", []),
    (["tiles", "gemm", "--gpu", "a100"], "--warp-fraction", (*FLOATS, "-1", "0", "2"),
     "--warp-fraction must be a finite number > 0 and <= 1", []),
    (["tiles", "gemm", "--gpu", "a100"], "--top", ("-1", "0", "1001"),
     "--top must be a whole number >= 1 and <= 1000", []),
    # tiles (HHC / DOACROSS), numbers in a string option too
    (["tiles", "--model", "hhc", "--stencil", "gradient2d", "--gpu", "gtx980", "--steps", "8"],
     "--size", ("0,-4", "0", "-1", "inf", "nan", "1e3", "8192,", "1,2,3,4", "2147483648"),
     "--size must be 1 to 3 whole numbers >= 1 and <= 2147483647 separated by ','", []),
    (["tiles", "--model", "hhc", "--stencil", "gradient2d", "--gpu", "gtx980", "--size", "64,64"],
     "--steps", ("-1", "0", "2147483648"),
     "--steps must be a whole number >= 1 and <= 2147483647", []),
    (["tiles", "--model", "doacross", "--nest", "sor2d", "--size", "64,64", "--steps", "8"],
     "--within", (*FLOATS, "-1", "10"), "--within must be a finite number >= 0 and < 10", []),
    # tiles-calibrate
    (["tiles-calibrate", "--model", "doacross", *SIM], "--clock", (*FLOATS, "-1", "0", "1e308"),
     "--clock must be a finite number of MHz > 0 and <= 100000", []),
    (["tiles-calibrate", "--model", "doacross", *SIM], "--threads",
     ("0,-5", "nan", "2048", "64,,128", ""),
     "--threads must be 1 to 32 whole numbers >= 1 and <= 1024 separated by ','", []),
    # occupancy
    (["occupancy", "--cc", "8.6"], "--threads", ("0", "-4x4", "2048", "1x1x1x1", "nan", "inf"),
     "--threads must be 1 to 3 whole numbers >= 1 and <= 1024 separated by 'x'", []),
    (["occupancy", "--cc", "8.6", "--threads", "256"], "--registers", ("-3", "256"),
     "--registers must be a whole number >= 0 and <= 255", []),
    (["occupancy", "--cc", "8.6", "--threads", "256"], "--shared-bytes", ("-1", "1048577"),
     "--shared-bytes must be a whole number of bytes >= 0 and <= 1048576", []),
    # tune-blocks
    (["tune-blocks"], "--threshold", (*FLOATS, "-0.1", "7"),
     "--threshold must be a finite number >= 0 and <= 1", []),
    (["tune-blocks"], "--start-clock", (*FLOATS, "-5", "0", "1e308"),
     "--start-clock must be a finite number of MHz > 0 and <= 100000", []),
    (["tune-blocks"], "--registers", ("-1", "256"),
     "--registers must be a whole number >= 0 and <= 255", []),
    (["tune-blocks"], "--shared-bytes", ("-1", "1048577"),
     "--shared-bytes must be a whole number of bytes >= 0 and <= 1048576", []),
    (["tune-blocks"], "--shared-per-thread", ("-1", "1048577"),
     "--shared-per-thread must be a whole number of bytes >= 0 and <= 1048576", []),
    # tegrastats
    (["tegrastats", "summarize", "/dev/null"], "--interval-ms", (*FLOATS, "-1", "0", "3600001"),
     "--interval-ms must be a finite number of ms >= 0.001 and <= 3600000", []),
    # daemon clients (nothing is contacted: the value is refused first)
    (["daemon", "status", "--socket", "/nonexistent.sock"], "--timeout-s",
     (*FLOATS, "-1", "0", "601"),
     "--timeout-s must be a finite number of seconds >= 0.1 and <= 600", []),
    (["daemon", "apply", "ppw", "--socket", "/nonexistent.sock"], "--timeout-s", ("nan",),
     "--timeout-s must be a finite number of seconds", []),
    (["daemon", "reset", "--socket", "/nonexistent.sock"], "--timeout-s", ("inf",),
     "--timeout-s must be a finite number of seconds", []),
    (["daemon", "lock", "--socket", "/nonexistent.sock"], "--min-mhz",
     (*FLOATS, "-1", "0", "1e308"),
     "--min-mhz must be a finite number of MHz > 0 and <= 100000", []),
    (["daemon", "lock", "--socket", "/nonexistent.sock", "--min-mhz", "900"], "--max-mhz",
     (*FLOATS, "-1", "0", "1e308"),
     "--max-mhz must be a finite number of MHz > 0 and <= 100000", []),
]  # fmt: skip


def _bad_cases() -> Iterator[Any]:
    for head, option, bad, needle, tail in TABLE:
        for value in bad:
            yield pytest.param(
                [*head, option, value, *tail], needle, id=f"{head[0]} {option} {value!r}"
            )


def _assert_usage_error(code: int, out: str, err: str, needle: str) -> None:
    assert code == 2, (code, err)
    assert err.startswith("governor: error: ") and err.count("\n") == 1 and err.endswith("\n")
    assert needle in err, err
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.parametrize("args, needle", list(_bad_cases()))
def test_a_bad_number_is_a_one_line_usage_error(capsys, args, needle):
    code, out, err = run_cli(capsys, *args)
    _assert_usage_error(code, out, err, needle)
    assert out == ""  # nothing ran


def test_the_message_says_what_was_given(capsys):
    code, _, err = run_cli(capsys, "calibrate", "--window-s", "inf")
    assert code == 2 and err == (
        "governor: error: --window-s must be a finite number of seconds > 0 and <= 3600, not inf\n"
    )
    code, _, err = run_cli(capsys, "simulate", "--duration-s", "-5")
    assert code == 2 and err.endswith(
        "--duration-s must be a finite number of seconds > 0 and <= 604800, not -5\n"
    )
    code, _, err = run_cli(
        capsys, "run", "--battery-wh", "nan", "--policy", "battery", "--", "true"
    )
    assert code == 2 and err.endswith("not nan\n")
    code, _, err = run_cli(capsys, "tiles", "--model", "hhc", "--size", "0,-4")
    assert code == 2 and err.endswith("not '0,-4'\n")


def test_json_callers_get_the_error_as_json(capsys):
    code, out, err = run_cli(capsys, "monitor", "--interval-s", "nan", "--json")
    assert code == 2
    assert json.loads(out) == {"error": err[len("governor: error: ") :].strip()}


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--duration-s", "604800"],  # a week at 0.1 s: 6 million control periods
        ["simulate", "--duration-s", "3600", "--interval-s", "0.001"],
        ["simulate", "--duration-s", "86400", "--interval-s", "1", "--trace", "perception-30hz"],
    ],
)
def test_simulate_refuses_runs_that_would_look_hung(capsys, args):
    code, out, err = run_cli(capsys, *args)
    _assert_usage_error(code, out, err, "simulation steps; at most 1000000")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["calibrate", "--device", "sim:agx-orin", "--no-save", "--window-s", "inf"], "--window-s"),
        (["monitor", "--device", "sim:agx-orin", "--interval-s", "inf", "-n", "2"], "--interval-s"),
        (["simulate", "--duration-s", "1e308"], "--duration-s"),
    ],
    ids=["calibrate-window-inf", "monitor-interval-inf", "simulate-duration-huge"],
)
def test_nothing_hangs_in_a_real_process(args, needle, tmp_path):
    env = dict(os.environ)
    env.update(GOVERNOR_STATE_DIR=str(tmp_path / "state"), GOVERNOR_DATA_DIR=str(tmp_path / "data"))
    proc = subprocess.run(
        [sys.executable, "-m", "governor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    _assert_usage_error(proc.returncode, proc.stdout, proc.stderr, needle + " must be a finite")
    assert proc.stdout == ""


# Values at the limits pass the checks (the command may still refuse them for its own
# reasons, as a failure with exit code 1: a clock above the board's top, say).
ACCEPTED = [
    (["monitor", *SIM, "--count", "1", "--interval-s", "0.01", "--json"], 0),
    (["monitor", *SIM, "-n", "2", "--interval-s", "3600", "--json"], 0),
    (["calibrate", "--device", "sim:agx-orin", "--no-save", "--max-probes", "4", "--window-s", "0.01",
      "--json"], 0),
    (["simulate", "--duration-s", "1", "--interval-s", "0.001", "--json"], 0),
    (["simulate", "--duration-s", "120", "--interval-s", "60", "--seed", "2147483647", "--json"], 0),
    (["simulate", "--duration-s", "1", "--seed", "0", "--policy", "battery", "--battery-wh",
      "1000000", "--hours", "8760", "--json"], 0),
    (["simulate", "--duration-s", "1", "--policy", "power-cap", "--cap-w", "100000", "--json"], 0),
    # a unit slip for the board: a usage error, as run and apply say it
    (["simulate", "--duration-s", "1", "--policy", "clock", "--clock", "100000", "--json"], 2),
    (["run", *SIM, "--policy", "max", "--interval-s", "60", "--json", "--stdout", os.devnull,
      "--", "true"], 0),
    (["run", *SIM, "--policy", "power-cap", "--cap-w", "100000", "--interval-s", "0.001",
      "--json", "--stdout", os.devnull, "--", "true"], 0),
    (["tiles", "gemm", "--gpu", "a100", "--shared-fraction", "0", "--warp-fraction", "1",
      "--top", "1000", "--json"], 0),
    (["tiles", "--model", "hhc", "--stencil", "gradient2d", "--gpu", "gtx980", "--size", "1,1",
      "--steps", "1", "--within", "0", "--json"], 0),
    (["tiles", "--model", "hhc", "--stencil", "gradient2d", "--gpu", "gtx980", "--size",
      "2147483647, 2147483647", "--steps", "2147483647", "--within", "9.99", "--json"], 0),
    (["occupancy", "--cc", "8.6", "--threads", "1024", "--registers", "0", "--shared-bytes",
      "0", "--json"], 0),
    (["occupancy", "--cc", "8.6", "--threads", "1x1x1", "--registers", "255", "--json"], 0),
    (["occupancy", "--cc", "8.6", "--threads", "1", "--shared-bytes", "1048576"], 1),
    (["tune-blocks", "--threshold", "0", "--json"], 0),
    (["tune-blocks", "--threshold", "1", "--start-clock", "100000", "--json"], 0),
    (["tegrastats", "summarize", "/dev/null", "--interval-ms", "0.001", "--json"], 0),
    (["tegrastats", "summarize", "/dev/null", "--interval-ms", "3600000", "--json"], 0),
    (["apply", *SIM, "--clock", "100000"], 2),  # a unit slip for the board: usage error
    (["apply", "--device", "sim:a100-pcie", "--power-limit", "100000"], 1),  # above its range
    (["tiles-calibrate", "--model", "doacross", *SIM, "--threads", "1024", "--clock", "100000"], 1),
    (["daemon", "status", "--socket", "/nonexistent.sock", "--timeout-s", "0.1"], 1),
    (["daemon", "status", "--socket", "/nonexistent.sock", "--timeout-s", "600"], 1),
    (["daemon", "lock", "--socket", "/nonexistent.sock", "--min-mhz", "100000", "--max-mhz",
      "100000"], 1),
]  # fmt: skip


@pytest.mark.parametrize("args, expected", ACCEPTED, ids=[" ".join(a[:3]) for a, _ in ACCEPTED])
def test_values_at_the_limits_are_accepted(capsys, args, expected):
    code, out, err = run_cli(capsys, *args)
    assert code == expected, err
    assert "Traceback" not in err and "internal error" not in err
    if expected == 1:
        assert err.count("\n") == 1 and "must be a finite" not in err and "whole number" not in err


# ---- the command tree: no numeric option without a check ----------------------------------

#: string options that carry numbers, which a type cannot reveal
NUMBERS_IN_TEXT = {
    ("tiles", "--size"),
    ("tiles-calibrate", "--threads"),
    ("occupancy", "--threads"),
}


def _commands(command: Any, path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], Any]]:
    yield path, command
    for name, sub in sorted((getattr(command, "commands", None) or {}).items()):
        yield from _commands(sub, path + (name,))


def _numeric(param: Any) -> bool:
    """Whether ``param`` takes an int or a float (plain, optional or a list of them)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:  # typer's own parameter types
        from typing import get_args

        annotation = descriptor.annotation
        kinds = (annotation, *get_args(annotation))
        return any(k in (int, float) for k in kinds)
    name = getattr(getattr(param, "type", None), "name", "")  # click's types
    return str(name).startswith(("integer", "float"))


def _own_range(param: Any) -> bool:
    """Whether ``param`` uses typer's or click's min/max instead of governor.cli.values."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None:
        info = descriptor.parameter_info
        return info.min is not None or info.max is not None
    return "range" in str(getattr(getattr(param, "type", None), "name", ""))


def unchecked_options(app: Any) -> List[str]:
    """Every numeric option of ``app`` (a typer app) without a governor.cli.values check."""
    import typer.main

    from governor.cli.values import is_checked

    missing = []
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            opts = list(getattr(param, "opts", []))
            spelled = max(opts, key=len) if opts else param.name
            text_numbers = any((path[-1] if path else "", o) in NUMBERS_IN_TEXT for o in opts)
            if not (_numeric(param) or text_numbers):
                continue
            where = " ".join(("governor", *path, spelled))
            if not is_checked(param.callback):
                missing.append(f"{where}: no governor.cli.values check")
            elif _own_range(param):
                missing.append(f"{where}: min/max beside the check (keep the limits in one place)")
    return missing


def test_every_numeric_option_has_a_check():
    from governor.cli.app import build_app

    assert unchecked_options(build_app()) == []


def test_the_tree_walk_sees_numeric_options():
    """The scan finds the options it must (so an empty result above means something)."""
    import typer.main

    from governor.cli.app import build_app

    seen: Dict[str, int] = {}
    for path, command in _commands(typer.main.get_command(build_app())):
        seen[" ".join(path)] = sum(_numeric(p) for p in command.params)
    assert seen["calibrate"] == 2 and seen["monitor"] == 2 and seen["daemon lock"] == 3
    assert sum(seen.values()) >= 40


def test_the_scan_catches_an_unchecked_option():
    # the annotations are evaluated in this module's globals (typer, values, Annotated)
    app = typer.Typer()

    @app.command("good")
    def good(
        x: Annotated[float, typer.Option("--x", callback=values.number(gt=0))] = 1.0,
    ) -> None:
        pass

    @app.command("bad")
    def bad(
        y: Annotated[float, typer.Option("--y")] = 1.0,
        n: Annotated[int, typer.Option("--n", min=1)] = 1,
        z: Annotated[int, typer.Option("--z", min=1, callback=values.count(le=5))] = 1,
        text: Annotated[str, typer.Option("--text")] = "",
    ) -> None:
        pass

    evaluate_annotations(app)  # as build_app does: typer before 3.10 reads them as text
    assert unchecked_options(app) == [
        "governor bad --y: no governor.cli.values check",
        "governor bad --n: no governor.cli.values check",
        "governor bad --z: min/max beside the check (keep the limits in one place)",
    ]


# ---- the helper itself ----------------------------------------------------------------


class _Param:
    opts = ["--frobs", "-f"]
    name = "frobs"


def test_number_check_bounds():

    check = values.number(gt=0, lt=1)
    assert check(None, _Param(), 0.5) == 0.5
    assert check(None, _Param(), None) is None
    for bad in (0.0, 1.0, math.inf, -math.inf, math.nan, True):
        with pytest.raises(values.OptionValueError) as info:
            check(None, _Param(), bad)
        assert info.value.format_message().startswith("--frobs must be a finite number > 0 and < 1")
        assert info.value.exit_code == 2


def test_integer_and_list_checks():

    assert values.integer(ge=0, le=3)(None, _Param(), 3) == 3
    with pytest.raises(values.OptionValueError, match="whole number of bytes >= 0 and <= 3, not 4"):
        values.integer(ge=0, le=3, unit="bytes")(None, _Param(), 4)
    with pytest.raises(values.OptionValueError, match="--frobs must be a whole number >= 1"):
        values.count(le=9)(None, _Param(), 0)
    assert values.integers(sep="x", le=1024)(None, _Param(), "16 x 16") == "16 x 16"
    with pytest.raises(values.OptionValueError, match="separated by 'x', not '16x0'"):
        values.integers(sep="x", le=1024)(None, _Param(), "16x0")


def test_policy_numbers_share_the_policies_limits():
    from governor.errors import InvalidRequestError
    from governor.runtime import policies

    check = values.policy_number("cap_w")
    assert check(None, _Param(), policies.LIMITS["cap_w"][1]) == 100000
    with pytest.raises(values.OptionValueError) as cli:
        check(None, _Param(), 1e6)
    with pytest.raises(InvalidRequestError) as lib:
        policies.PowerCap(cap_w=1e6)
    assert str(cli.value) == str(lib.value).replace("cap_w", "--frobs")


# ---- the library refuses the same nonsense --------------------------------------------


def test_library_refuses_non_finite_spans():
    import governor
    from governor.calibrate.loads import make_load
    from governor.calibrate.procedure import DeviceProber
    from governor.devices.tegrastats.summary import summarize
    from governor.errors import InvalidRequestError
    from governor.runtime import Governor

    with governor.open_device("sim:agx-orin") as dev:
        load = make_load(dev, "builtin")
        for kwargs in ({"window_s": math.inf}, {"window_s": math.nan}, {"window_s": -1},
                       {"idle_s": -1}, {"min_settle_s": math.nan}):  # fmt: skip
            with pytest.raises(InvalidRequestError):
                DeviceProber(dev, load, **kwargs)
        for kwargs in ({"interval_s": math.inf}, {"interval_s": math.nan}, {"interval_s": 0},
                       {"min_dwell_s": math.nan}, {"min_dwell_s": -1}, {"fail_limit": 0},
                       {"fail_limit": math.inf}):  # fmt: skip
            with pytest.raises(InvalidRequestError):
                Governor(dev, {"policy": "max"}, background=False, **kwargs)
    for interval_ms in (0, -1, math.inf, math.nan):
        with pytest.raises(InvalidRequestError, match="interval_ms"):
            summarize([], interval_ms=interval_ms)


def test_library_refuses_a_nan_start_clock():
    from governor.errors import InvalidRequestError
    from governor.tuning.blocks.procedures import _nearest_index

    assert _nearest_index([300.0, 600.0, 900.0], 640.0) == 1
    with pytest.raises(InvalidRequestError, match="not nan"):
        _nearest_index([300.0, 600.0, 900.0], math.nan)
