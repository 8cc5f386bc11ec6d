"""Every command that reads a profile turns a malformed one into one line and exit code 1,
naming the file and the field, without a traceback and without touching the device; the
Python API raises ProfileError. (Except calibrate, which replaces it: see
test_invalid_profile_calibrate.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import run_cli
from profile_seeds import calibrated

import governor
from governor.errors import ProfileError
from governor.profiles.store import profile_paths
from governor.runtime import Governor

FIELD = "workloads.memory.ppw_optimal_clock_mhz must be a finite number, not 'fast'"


@pytest.fixture
def bad_profile():
    """agx-orin's user profile, valid JSON, with one malformed field deep inside."""
    doc = calibrated("agx-orin")
    doc["workloads"]["memory"]["ppw_optimal_clock_mhz"] = "fast"
    path = profile_paths("agx-orin")[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _state_files():
    root = Path(os.environ["GOVERNOR_STATE_DIR"])
    return sorted(p.name for p in root.rglob("*") if p.is_file()) if root.exists() else []


COMMANDS = {
    "apply": ["apply", "ppw", "--device", "sim:agx-orin"],
    "apply-workload": ["apply", "ppw", "--workload", "memory", "--device", "sim:agx-orin"],
    "run": ["run", "--device", "sim:agx-orin", "--", "true"],
    "run-power-cap": ["run", "--device", "sim:agx-orin", "--policy", "power-cap",
                      "--cap-w", "20", "--", "true"],
    "simulate": ["simulate", "--board", "agx-orin", "--duration-s", "5"],
    "profile-show": ["profile", "show", "agx-orin"],
    "profile-show-device": ["profile", "show", "--device", "sim:agx-orin"],
    "profile-import": ["profile", "import", "{path}", "--device", "sim:agx-orin"],
    "tiles": ["tiles", "gemm", "--gpu", "xavier", "--board", "agx-orin"],
    "tiles-save": ["tiles", "gemm", "--gpu", "xavier", "--board", "agx-orin", "--save"],
    "tiles-hhc": ["tiles", "--model", "hhc", "--stencil", "jacobi2d", "--gpu", "gtx980",
                  "--size", "256,256", "--steps", "8", "--board", "agx-orin"],
    "tune-blocks": ["tune-blocks", "--device", "sim:agx-orin", "-k", "vector-add"],
    # not calibrate: it sets an invalid profile aside and writes a valid one
    # (test_invalid_profile_calibrate.py)
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_malformed_profile_is_one_line_and_exit_1(capsys, bad_profile, name):
    args = [a.replace("{path}", str(bad_profile)) for a in COMMANDS[name]]
    before = bad_profile.read_text()
    for extra in ([], ["--json"]):
        if "--" in args:  # run: governor's options go before the job's command, and its
            # --json needs the job's stdout elsewhere
            cut = args.index("--")
            extra_args = [*args[:cut], *extra, *(["--stdout", os.devnull] if extra else [])]
            code, out, err = run_cli(capsys, *extra_args, *args[cut:])
        else:
            code, out, err = run_cli(capsys, *args, *extra)
        assert code == 1, (code, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("governor: error: profile "), err
        assert str(bad_profile) in err and FIELD in err, err
        assert "Traceback" not in err and "internal error" not in err
        if extra:
            assert FIELD in json.loads(out)["error"]
    assert _state_files() == []  # nothing journaled: the device was never changed
    assert bad_profile.read_text() == before  # and the file is left for the user to fix


def test_a_profile_clock_the_device_lacks_is_refused_even_when_forced(capsys):
    """Another board's profile, forced onto a Nano whose top clock is below its PPW clock."""
    src = profile_paths("a100-pcie")[1]  # shipped: PPW 1005 MHz
    code, out, err = run_cli(capsys, "profile", "import", src, "--device", "sim:nano", "--force")
    assert code == 1 and "ppw_optimal_clock_mhz 1005 MHz is outside the device's supported" in err
    assert not profile_paths("nano")[0].exists()  # not installed


def test_governor_api_raises_profile_error_and_leaves_the_device_alone(bad_profile):
    with governor.open_device("sim:agx-orin") as dev:
        for profile in (None, bad_profile, str(bad_profile)):
            with pytest.raises(ProfileError) as info:
                Governor(dev, {"policy": "ppw"}, profile=profile, background=False)
            assert FIELD in str(info.value) and str(bad_profile) in str(info.value)
            assert info.value.path == bad_profile or str(info.value.path) == str(bad_profile)
        doc = json.loads(bad_profile.read_text())
        doc["workloads"]["memory"]["ppw_optimal_clock_mhz"] = float("nan")
        with pytest.raises(ProfileError, match="profile \\(given\\): workloads.memory.ppw"):
            Governor(dev, {"policy": "ppw"}, profile=doc, background=False)
        assert not dev.changed and dev.state().gpu_clocks_mhz is None


def test_no_profile_or_another_boards_still_falls_back(capsys):
    with governor.open_device("sim:agx-orin") as dev:
        gov = Governor(dev, {"policy": "ppw"}, background=False)
        assert not gov.model.fitted and "no profile for agx-orin" in gov.notes[0]
    doc = calibrated("nano")
    path = profile_paths("agx-orin")[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    with governor.open_device("sim:agx-orin") as dev:
        gov = Governor(dev, {"policy": "ppw"}, background=False)
        assert not gov.model.fitted and "another board" in gov.notes[0]
        assert "--force" not in gov.notes[0]  # the runtime has no --force to offer
    code, out, err = run_cli(capsys, "apply", "ppw", "--device", "sim:agx-orin", "--json")
    assert code == 0 and "another board" in json.loads(out)["notes"][0]
    run_cli(capsys, "reset", "--device", "sim:agx-orin")


def test_a_corrupt_profile_says_that_calibrate_sets_it_aside_and_calibrate_does(capsys):
    """The error names the way out (issue 49), and the way out works as said."""
    (path, _shipped) = profile_paths("nano")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"{torn")
    code, _out, err = run_cli(capsys, "apply", "ppw", "--device", "sim:nano")
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "corrupt profile" in line and str(path) in line
    assert line.endswith(
        "'governor calibrate' on that board sets it aside and writes a new one (or remove the file)"
    )
    code, _out, err = run_cli(capsys, "calibrate", "--device", "sim:nano")
    assert code in (0, None), err
    assert json.loads(path.read_text())["board"] == "nano"
    assert [p.name.split(".json.")[1][:7] for p in path.parent.glob("nano.json.*")] == ["invalid"]
