"""`governor calibrate` and `governor profile` end to end, profiles round-trip, bad inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from cli_helpers import run_cli

import governor
from governor.calibrate.loads import make_load
from governor.calibrate.procedure import DeviceProber, calibrate
from governor.errors import ProfileError
from governor.models.power import PowerModel
from governor.models.time import TimeModel
from governor.profiles.profile import find_profile, load_profile_for, save_calibration

DATA = Path(__file__).resolve().parents[1] / "data"


def run(args, capsys):
    return run_cli(capsys, *args)


def test_calibrate_json_has_the_contract_keys_and_writes_a_profile(capsys):
    code, out, err = run(["calibrate", "--device", "sim:orin-nx", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    for key in (
        "device",
        "ridge_clock_mhz",
        "ppw_optimal_clock_mhz",
        "probes",
        "probe_clocks_mhz",
        "device_time_s",
        "model",
        "profile_path",
    ):
        assert key in doc
    assert (
        doc["device"] == "sim:orin-nx" and doc["probes"] == len(set(doc["probe_clocks_mhz"])) <= 6
    )
    assert (
        doc["ppw_optimal_clock_mhz"] in governor.open_device("sim:orin-nx").supported_clocks_mhz()
    )
    assert "uncertainty" in doc["model"]["power"]
    saved = json.loads(Path(doc["profile_path"]).read_text())
    assert saved["ppw_optimal_clock_mhz"] == doc["ppw_optimal_clock_mhz"]
    assert saved["fingerprint"]["model"] == "orin-nx" and saved["schema_version"] == 1
    assert saved["provenance"]["versions"]["governor"] == governor.__version__
    assert len(saved["probes"]) == doc["probes"]


def test_default_calibration_says_it_uses_the_simulated_board(capsys):
    code, out, err = run(["calibrate", "--no-save"], capsys)
    assert code == 0 and "no GPU found: using the simulated board sim:agx-orin" in err
    assert "PPW-optimal clock" in out


def test_profile_round_trip_keeps_models_and_other_loads():
    dev = governor.open_device("sim:titan-x")
    comp = calibrate(DeviceProber(dev, make_load(dev, "builtin")))
    save_calibration(dev, comp, {"kind": "builtin", "name": "compute"})
    mem = calibrate(DeviceProber(dev, make_load(dev, "memory")))
    path = save_calibration(dev, mem, {"kind": "memory", "name": "memory"})
    _, doc, warnings = load_profile_for(dev)
    assert warnings == []
    assert set(doc["workloads"]) == {"builtin", "memory"}
    assert (
        doc["ppw_optimal_clock_mhz"] == comp.ppw_optimal_clock_mhz
    )  # top level: the built-in load
    assert doc["workloads"]["memory"]["ppw_optimal_clock_mhz"] == mem.ppw_optimal_clock_mhz
    power = PowerModel.from_dict(doc["power_model"])
    time = TimeModel.from_dict(doc["time_model"])
    for f in (700.0, 1000.0):
        assert power.power_w(f) == pytest.approx(comp.power_model.power_w(f))
        assert time.time_s(f) == pytest.approx(comp.time_model.time_s(f))
    assert math.isinf(power.p_max_w) or power.p_max_w > 0
    assert find_profile("titan-x")[0] == path


def test_shipped_reference_profile_is_found_and_fits_the_real_card():
    path, doc = find_profile("a100-pcie")
    assert path.parent.name in ("profiles", "_shipped_profiles")
    assert doc["ppw_optimal_clock_mhz"] == 1005.0
    assert "Apache-2.0" in doc["provenance"]["source"]
    with governor.open_device("sim:a100-pcie") as dev:  # the same clock table: accepted
        assert load_profile_for(dev)[1]["board"] == "a100-pcie"


def test_profile_from_another_board_is_refused_unless_forced(capsys, tmp_path):
    other = tmp_path / "other.json"
    other.write_text((Path(find_profile("rtx-a4000")[0])).read_text())
    code, out, err = run(["profile", "import", str(other), "--device", "sim:t4"], capsys)
    assert (
        code == 1
        and "profile is for another board" in err
        and "--force" in err
        and str(other) in err
    )
    code, out, err = run(
        ["profile", "import", str(other), "--device", "sim:t4", "--force", "--json"], capsys
    )
    assert code == 0 and json.loads(out)["warnings"]
    code, out, err = run(["profile", "show", "--device", "sim:t4"], capsys)
    assert code == 1 and "another board" in err
    code, out, err = run(["profile", "show", "--device", "sim:t4", "--force"], capsys)
    assert code == 0 and "warning" in out


def test_corrupt_profile_names_the_file(capsys, tmp_path, monkeypatch):
    folder = Path(str(tmp_path)) / "data"
    monkeypatch.setenv("GOVERNOR_DATA_DIR", str(folder))
    (folder / "profiles").mkdir(parents=True)
    bad = folder / "profiles" / "t4.json"
    bad.write_text('{"board": "t4", "power_model": ')
    code, out, err = run(["profile", "show", "t4"], capsys)
    assert (
        code == 1
        and "corrupt profile" in err
        and str(bad) in err
        and len(err.strip().splitlines()) == 1
    )
    bad.write_text('{"board": "t4"}')
    with pytest.raises(ProfileError, match="missing"):
        find_profile("t4")
    bad.write_text('{"schema_version": 99, "board": "t4"}')
    with pytest.raises(ProfileError, match="newer"):
        find_profile("t4")
    # calibrating neither merges into a newer governor's file nor sets it aside: it says so,
    # and works once the file is removed (an invalid one it replaces:
    # tests/profiles/test_invalid_profile_calibrate.py)
    code, out, err = run(["calibrate", "--device", "sim:t4", "--json"], capsys)
    assert code == 1 and "fix or remove it" in err and str(bad) in err
    assert "newer" in json.loads(out)["error"] and "Traceback" not in err
    assert json.loads(bad.read_text())["schema_version"] == 99  # left as it was
    bad.unlink()
    code, out, err = run(["calibrate", "--device", "sim:t4", "--json"], capsys)
    assert code == 0 and find_profile("t4")[1]["board"] == "t4"


def test_profile_list_shows_user_and_shipped(capsys):
    run(["calibrate", "--device", "sim:nano", "--json"], capsys)
    code, out, err = run(["profile", "list", "--json"], capsys)
    rows = {r["board"]: r for r in json.loads(out)["profiles"]}
    assert rows["nano"]["source"] == "user" and rows["a100-pcie"]["source"] == "shipped"


def test_replay_files_calibrate_from_the_cli(capsys):
    for path in (
        DATA / "replay" / "titanx_sort_mem810.csv",
        DATA / "kernel_tuner" / "synthetic_fp32_cache_NVIDIA_A100-PCIE-40GB.json",
    ):
        code, out, err = run(["calibrate", "--device", f"replay:{path}", "--json"], capsys)
        doc = json.loads(out)
        assert code == 0 and doc["probes"] <= 6 and doc["load"]["kind"] == "replay"


def test_plot_is_drawn(capsys, tmp_path):
    png = tmp_path / "cal.png"
    code, out, err = run(
        ["calibrate", "--device", "sim:a100-pcie", "--plot", str(png), "--no-save", "--json"],
        capsys,
    )
    assert code == 0 and png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert json.loads(out)["profile_path"] is None


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "content,needle",
    [
        (None, "cannot read replay file"),
        ("# device: x\nclock_mhz,power_w,time_s\n300,10,1\n600,20,0.5\n", "only 2 distinct clock"),
        ("clock_mhz,power_w,time_s\n300,10,1\n600,nan,0.5\n900,30,0.3\n", "not a finite number"),
        ("clock_mhz,power_w,time_s\n300,10,1\n600,-2,0.5\n900,30,0.3\n", "must be positive"),
        ("clock,power\n300,10\n", "column 'clock' has no unit"),
        ("clock_mhz,power_w\n300,10\n", "header lacks time_s"),
        ("clock_mhz,power_w,time_s\n300,10,1\n300,11,1\n900,30,0.3\n", "appears twice"),
        ('{"cache": {}}', "not a Kernel Tuner cache"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_replay_files_are_one_line_errors(capsys, tmp_path, content, needle):
    path = tmp_path / "missing.csv" if content is None else _write(tmp_path, "sweep.csv", content)
    code, out, err = run(["calibrate", "--device", f"replay:{path}"], capsys)
    assert code == 1 and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "args,code_expected,needle",
    [
        (["calibrate", "--device", "sim:warp-drive"], 1, "unknown simulated board"),
        (["calibrate", "--device", "pci:3"], 1, "unknown device"),
        (["calibrate", "--device", "sim:t4", "--max-probes", "2"], 2, "--max-probes must be"),
        (["calibrate", "--device", "sim:t4", "--window-s", "0"], 2, "--window-s must be a finite"),
        (["calibrate", "--device", "sim:t4", "--load", "echo hi"], 1, "real time"),
        (["calibrate", "--device", "sim:t4", "--max-probes", "many"], 2, "--max-probes"),
        (["profile", "show", "no-such-board"], 1, "no profile for board"),
    ],
)
def test_bad_calibrate_inputs(capsys, args, code_expected, needle):
    code, out, err = run(args, capsys)
    assert code == code_expected and needle in err and "Traceback" not in err
    code, out, err = run(args + ["--json"], capsys)
    if code_expected == 1:
        assert needle in json.loads(out)["error"]


def test_a_fit_that_explains_nothing_still_answers_with_the_best_probe(capsys, tmp_path):
    """Zigzag power no CMOS law explains: exit 0, the best measured probe, one warning line,
    a profile marked best-probe, and the raw points kept."""
    powers = [50, 80, 55, 85, 60, 70, 65, 90, 58, 75, 62]
    path = _write(
        tmp_path,
        "zigzag.csv",
        "clock_mhz,power_w,time_s\n"
        + "".join(f"{300 + 100 * i},{p},{1.0 / (1 + i)}\n" for i, p in enumerate(powers)),
    )
    code, out, err = run(["calibrate", "--device", f"replay:{path}", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["method"] == "best-probe" and doc["warnings"] and doc["model"] is None
    assert doc["probes"] <= 6
    measured = {p["requested_mhz"]: p["energy_per_unit_j"] for p in doc["points"]}
    assert measured[doc["ppw_optimal_clock_mhz"]] == min(measured.values())
    warn = [line for line in err.splitlines() if "warning" in line]
    assert len(warn) == 1 and "best measured probe" in warn[0]
    kept = Path(warn[0].split("raw points kept in ")[1].split(")")[0])
    assert json.loads(kept.read_text())["data"]["probes"][0]["power_w"] in powers
    profile = json.loads(Path(doc["profile_path"]).read_text())
    assert profile["method"] == "best-probe" and profile["power_model"] is None
    assert profile["ppw_optimal_clock_mhz"] == doc["ppw_optimal_clock_mhz"]

    # the runtime's clock model accepts it: measured probes stand in for the model
    from governor.runtime.model import model_from_profile

    clocks = profile["fingerprint"]["supported_clocks_mhz"]
    model = model_from_profile(clocks, profile)
    assert model.fitted and "best-probe" in model.source
    assert model.ppw_clock_mhz == doc["ppw_optimal_clock_mhz"]
    assert min(model.power_w) > 0 and model.time_rel[-1] == 1.0

    # the loader's checks accept it, and 'profile show' tells what it is
    from governor.profiles.store import read_profile_file

    assert read_profile_file(Path(doc["profile_path"]))["method"] == "best-probe"
    code, out, err = run(["profile", "show", profile["board"]], capsys)
    assert code == 0 and "best-probe" in out and "Traceback" not in err


def test_plain_output_of_a_best_probe_calibration_says_so(capsys, tmp_path):
    path = _write(
        tmp_path,
        "zigzag.csv",
        "clock_mhz,power_w,time_s\n"
        + "".join(
            f"{300 + 100 * i},{p},{1.0 / (1 + i)}\n"
            for i, p in enumerate([50, 80, 55, 85, 60, 70, 65, 90, 58, 75, 62])
        ),
    )
    code, out, err = run(["calibrate", "--device", f"replay:{path}", "--no-save"], capsys)
    assert code == 0 and "best-probe" in out and "PPW-optimal clock" in out
    assert "warning:" in err


def test_a_simulated_calibration_is_not_taken_for_the_real_board(tmp_path):
    """Calibrating sim:nano writes nano.json; a real Nano must not silently use it."""
    from dataclasses import replace

    from governor.profiles.profile import check_fingerprint

    sim = governor.open_device("sim:nano")
    result = calibrate(DeviceProber(sim, make_load(sim, "builtin")))
    save_calibration(sim, result, {"kind": "builtin", "name": "compute"})
    real = governor.open_device("sim:nano")
    real.identity = replace(real.identity, kind="jetson")  # same board and clocks, real hardware
    with pytest.raises(ProfileError, match="simulated board"):
        load_profile_for(real)
    _, doc = find_profile("nano")
    assert check_fingerprint(doc, real, force=True)  # forced: accepted, with the warning
    # a real calibration replaces the simulated one instead of merging into it
    path = save_calibration(real, result, {"kind": "memory", "name": "memory"})
    assert set(json.loads(path.read_text())["workloads"]) == {"memory"}


def test_a_profile_with_only_tuning_caches_shows_them_and_says_it_is_not_calibrated(capsys):
    from governor.profiles.store import put_tuning

    put_tuning("orin-nx", "tiles", "gemm", {"tiles": {"i": 16}})
    code, out, err = run(["profile", "show", "orin-nx"], capsys)
    assert code == 0 and "not calibrated yet" in out and "tiles: 1 entry" in out
    run(["calibrate", "--device", "sim:orin-nx", "--json"], capsys)  # keeps the cache
    _, doc = find_profile("orin-nx")
    assert doc["tuning"]["tiles"]["gemm"] == {"tiles": {"i": 16}}


def test_a_v100_like_sweep_gets_a_clock_a_profile_and_says_how(capsys, tmp_path):
    """SYNTHETIC sweep shaped like the issue's V100 ones (run time rising up to 4x faster
    than 1/f below ~700 MHz; a ridge near 1200 MHz): through the CLI it yields a clock near
    the best measured one, a profile, and the method used."""
    clocks = [135.0 + 52.5 * i for i in range(27)]  # 135 .. 1500 MHz
    rows = []
    for f in clocks:
        t = 0.002 + 6.0 / f + 0.004 * (700.0 / f) ** 4
        v = 1.0 + 0.0009 * max(0.0, f - 1200.0)
        rows.append((f, 40.0 + 0.12 * f * v * v, t))
    path = _write(
        tmp_path,
        "v100like.csv",
        "# device: SYNTHETIC V100-like sweep (tests only)\nclock_mhz,power_w,time_s\n"
        + "".join(f"{f},{p:.4f},{t:.6g}\n" for f, p, t in rows),
    )
    code, out, err = run(["calibrate", "--device", f"replay:{path}", "--json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["method"] in ("model", "best-probe") and doc["profile_path"]
    assert (doc["method"] == "best-probe") == bool(doc["warnings"])
    energy = {f: p * t for f, p, t in rows}
    assert energy[doc["ppw_optimal_clock_mhz"]] <= 1.03 * min(energy.values())
