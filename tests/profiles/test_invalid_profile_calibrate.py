"""An invalid profile is no dead end for ``governor calibrate``: it sets the old file aside
(with a UTC timestamp), keeps its valid parts (other loads' calibrations, tuning caches),
writes a profile every reader accepts, and says so in one line. And governor never writes a
profile its own reader would refuse."""

from __future__ import annotations

import json
import math

import pytest
from cli_helpers import run_cli
from profile_seeds import calibrated

from governor.errors import ProfileError
from governor.profiles.schema import check_calibrated, salvage
from governor.profiles.store import profile_paths, read_profile_file, write_profile_file

BOARD = "agx-orin"
DEVICE = "sim:agx-orin"


def _plant(doc) -> tuple:
    """Write ``doc`` as the user's profile of the board, NaN written as JSON's NaN literal
    (what json.dump writes for a float NaN); returns (path, the bytes written)."""
    path = profile_paths(BOARD)[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    text = doc if isinstance(doc, str) else json.dumps(doc)
    path.write_text(text)
    return path, path.read_bytes()


def _asides(path):
    return sorted(path.parent.glob(path.name + ".invalid-*"))


def _invalid_doc():
    """A calibrated profile with a negative idle power in the built-in load's model (top level
    and workload), a NaN in one tuning entry, and valid parts besides."""
    doc = calibrated(BOARD)
    doc["power_model"]["p_idle_w"] = -5.79
    doc["workloads"]["builtin"]["power_model"]["p_idle_w"] = -5.79
    doc["tuning"]["blocks"]["vector-add@time"] = {"blocks": [[128, 1, 1]], "clock_mhz": math.nan}
    return doc


def test_calibrate_sets_an_invalid_profile_aside_and_keeps_its_valid_parts(capsys):
    old = _invalid_doc()
    path, before = _plant(old)
    with pytest.raises(ProfileError, match="p_idle_w must be >= 0, not -5.79"):
        read_profile_file(path)  # what every reader says of it

    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE, "--json")
    assert code == 0, err
    # one line about the profile: the problem, where the old file went, what was kept
    said = [line for line in err.splitlines() if str(path) in line]
    assert len(said) == 1 and "p_idle_w must be >= 0, not -5.79" in said[0], err
    (aside,) = _asides(path)
    assert aside.read_bytes() == before and aside.name in said[0]
    assert "workloads.memory" in said[0] and "tuning.tiles" in said[0]
    assert "tuning.blocks.vector-add@time" in said[0]  # left out, and said so

    new = check_calibrated(read_profile_file(path), path)  # every reader accepts it
    assert json.loads(out)["profile_path"] == str(path)
    assert new["workloads"]["memory"] == old["workloads"]["memory"]  # another load's: kept
    assert new["tuning"]["tiles"] == old["tuning"]["tiles"]
    assert new["tuning"]["hhc-constants"] == old["tuning"]["hhc-constants"]
    assert new["tuning"]["blocks"] == {
        "vector-add@energy": old["tuning"]["blocks"]["vector-add@energy"]
    }
    for entry in (new, *new["workloads"].values()):
        assert entry["power_model"]["p_idle_w"] >= 0
    code, out, err = run_cli(capsys, "profile", "show", BOARD)
    assert code == 0 and "with loads: builtin, memory" in out, err
    # and the next calibration is an ordinary one: nothing more set aside
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE, "--json")
    assert code == 0 and str(path) not in err and len(_asides(path)) == 1


def test_a_nan_in_another_loads_calibration_is_left_out_and_the_rest_kept(capsys):
    old = calibrated(BOARD)
    old["workloads"]["memory"]["ppw_optimal_clock_mhz"] = math.nan
    path, before = _plant(old)
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE)
    assert code == 0, err
    (aside,) = _asides(path)
    assert aside.read_bytes() == before
    new = check_calibrated(read_profile_file(path), path)
    assert sorted(new["workloads"]) == ["builtin"]
    kept = {k: v for k, v in new["tuning"].items() if k != "ppw-pair"}  # this calibration's pair
    assert kept == old["tuning"]
    line = next(line for line in err.splitlines() if str(path) in line)
    assert "workloads.memory.ppw_optimal_clock_mhz must be a finite number, not nan" in line
    assert "left out: workloads.memory" in line


def test_a_file_that_is_not_a_profile_is_set_aside_and_replaced(capsys):
    path, before = _plant('{"board": "agx-orin", "tuning": ')
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE)
    assert code == 0 and "corrupt profile (not JSON" in err, err
    (aside,) = _asides(path)
    assert aside.read_bytes() == before
    assert sorted(check_calibrated(read_profile_file(path), path)["workloads"]) == ["builtin"]


@pytest.mark.parametrize("extra", [["--no-save"], ["--if-missing", "--no-save"]])
def test_without_saving_the_invalid_file_is_left_alone(capsys, extra):
    path, before = _plant(_invalid_doc())
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE, *extra)
    assert code == 0, err
    assert path.read_bytes() == before and _asides(path) == []


def test_if_missing_counts_an_invalid_profile_as_missing(capsys):
    path, _ = _plant(_invalid_doc())
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE, "--if-missing", "--json")
    assert code == 0 and json.loads(out)["skipped"] is False, err
    assert len(_asides(path)) == 1
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE, "--if-missing", "--json")
    assert code == 0 and json.loads(out)["skipped"] is True


def test_a_newer_schema_is_still_refused_and_left_alone(capsys):
    doc = calibrated(BOARD)
    doc["schema_version"] = 99
    path, before = _plant(doc)
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "schema_version 99 is newer" in err and "fix or remove it" in err
    assert path.read_bytes() == before and _asides(path) == []


def test_a_write_the_reader_would_refuse_is_a_bug_report_and_no_file(capsys, monkeypatch):
    # the writer runs the reader's rules first: a fit gone unphysical (or any bug that
    # builds a bad document) is one line and exit 1, never a file on disk
    from governor.profiles import profile as profile_mod

    real = profile_mod.build_profile

    def unphysical(*args, **kwargs):
        doc = real(*args, **kwargs)
        doc["power_model"] = dict(doc["power_model"], p_idle_w=-5.79)
        return doc

    monkeypatch.setattr(profile_mod, "build_profile", unphysical)
    path = profile_paths(BOARD)[0]
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "refusing to write an invalid profile" in err and "a bug in governor" in err
    assert "power_model.p_idle_w must be >= 0, not -5.79" in err and "Traceback" not in err
    assert not path.exists() and list(path.parent.glob("*")) == []  # no temporary left either
    # over an invalid profile: the old file stays where it was, nothing set aside
    path, before = _plant(_invalid_doc())
    code, out, err = run_cli(capsys, "calibrate", "--device", DEVICE)
    assert code == 1 and path.read_bytes() == before and _asides(path) == []


def test_write_profile_file_refuses_what_read_profile_file_refuses(tmp_path):
    path = tmp_path / "p.json"
    write_profile_file(path, {"board": "x", "tuning": {}})
    before = path.read_bytes()
    for bad in (
        {"board": "x", "ppw_optimal_clock_mhz": math.nan},
        {"board": "x", "power_model": {"p_idle_w": -1.0, "alpha_w_per_mhz": 0.1,
                                       "ridge_clock_mhz": 900.0, "beta_per_mhz": 0.0}},
        {"board": "x", "tuning": {"tiles": {"gemm": {"tiles": {"i": 0}}}}},
    ):  # fmt: skip
        with pytest.raises(ProfileError, match="refusing to write an invalid profile") as info:
            write_profile_file(path, bad)
        assert "\n" not in str(info.value)
        assert path.read_bytes() == before


def test_salvage_keeps_exactly_the_parts_that_pass():
    doc = calibrated(BOARD)
    clocks = doc["fingerprint"]["supported_clocks_mhz"]
    assert salvage(doc, clocks) == (dict(doc, schema_version=1), [])  # a valid one: all
    doc["workloads"]["memory"]["ridge_clock_mhz"] = 10.0 * max(clocks)  # outside the table
    doc["tuning"]["tiles"]["gemm/double"]["tiles"]["i"] = -32
    doc["fingerprint"] = {"supported_clocks_mhz": []}
    kept, dropped = salvage(doc, clocks)
    assert sorted(dropped) == ["fingerprint", "tuning.tiles.gemm/double", "workloads.memory"]
    assert sorted(kept["workloads"]) == ["builtin"] and kept["tuning"]["tiles"] == {}
    assert kept["tuning"]["blocks"] == doc["tuning"]["blocks"]
    assert kept["power_model"] == doc["power_model"] and "fingerprint" not in kept
    assert salvage([1, 2], clocks) == ({}, ["the whole document"])


def _sweep(path, clocks):
    """A replay sweep over ``clocks``: power rising with the clock, run time falling."""
    rows = [f"{c:g},{20.0 + 0.1 * c:.6g},{1.0 / c + 1e-3:.6g}" for c in clocks]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("clock_mhz,power_w,time_s\n" + "\n".join(rows) + "\n")
    return path


def test_a_profile_made_with_another_clock_table_keeps_what_still_fits(capsys, tmp_path):
    # one board name (a replay file's stem), two clock tables: the first calibration's clocks
    # lie outside the second's table, so merging them would write a profile the reader
    # refuses; instead that part is set aside with the old file, and the tuning cache kept
    first = _sweep(tmp_path / "a" / "sweep.csv", range(300, 1501, 100))
    code, out, err = run_cli(capsys, "calibrate", "--device", f"replay:{first}", "--json")
    assert code == 0, err
    path = profile_paths("replay-sweep")[0]
    doc = json.loads(path.read_text())
    doc["tuning"] = {"tiles": {"gemm/single": {"tiles": {"i": 32}}}}
    doc["workloads"]["memory"] = doc["workloads"]["replay"]  # another load's, same clocks
    path.write_text(json.dumps(doc))
    low = doc["ppw_optimal_clock_mhz"]  # about 450 MHz: where 20/f + 1e-4·f is least
    second = _sweep(tmp_path / "b" / "sweep.csv", [c for c in range(300, 1501, 50) if c > low])
    code, out, err = run_cli(capsys, "calibrate", "--device", f"replay:{second}", "--json")
    assert code == 0, err
    line = next(line for line in err.splitlines() if str(path) in line)
    assert "workloads.memory" in line and "lie outside this device's clock table" in line
    assert "keeping tuning.tiles" in line
    new = check_calibrated(read_profile_file(path), path)
    assert new["tuning"] == doc["tuning"] and len(_asides(path)) == 1
    assert sorted(new["workloads"]) == ["replay"]
    # the same with only the load being calibrated outside the table: it is replaced anyway,
    # so nothing is set aside and nothing said
    low = new["ppw_optimal_clock_mhz"]
    third = _sweep(tmp_path / "c" / "sweep.csv", [c for c in range(300, 1501, 25) if c > low])
    code, out, err = run_cli(capsys, "calibrate", "--device", f"replay:{third}")
    assert code == 0 and str(path) not in err and len(_asides(path)) == 1, err
