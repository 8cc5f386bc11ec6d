"""Every real sweep, calibrated twice into one data directory the way a user would run it:
the second calibration answers, every profile loads with ``governor profile show``, and no
fitted idle power is negative (issue 39: a V100 sweep's fit wrote ``p_idle_w: -5.79``, which
the reader refuses, so the next calibration failed on it). The same loop runs on sweeps drawn
from the power law with a negative intercept, the shape that made those fits leave the
physical region, since the project is also checked on real sweeps these tests never see."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from cli_helpers import run_cli

from governor.devices.replay_files import read_sweep
from governor.errors import CalibrationError, InvalidRequestError

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = (ROOT / "tests" / "data", ROOT.parent / "shared" / "data")


def _real_sweeps():
    """Every file under the data folders that reads as a clock sweep, each content once."""
    seen, found = set(), []
    for folder in FOLDERS:
        for path in sorted(folder.rglob("*")):
            if path.suffix not in (".csv", ".json") or not path.is_file():
                continue
            try:
                sweep = read_sweep(path)
            except InvalidRequestError:
                continue  # not a clock sweep (a block-size cache, another format)
            key = hashlib.sha256(
                json.dumps([sweep.clock_mhz, sweep.power_w, sweep.time_s]).encode()
            ).hexdigest()
            if key not in seen:
                seen.add(key)
                found.append(path)
    return found


def _profile_of(capsys, uri):
    code, out, err = run_cli(capsys, "calibrate", "--device", uri, "--json")
    return code, (json.loads(out) if code == 0 else None), err


def _calibrate_twice(capsys, paths):
    """Calibrate each sweep twice into the test's data directory, then show every profile;
    returns the problems found (empty: all well)."""
    problems = []
    profiles = {}
    for path in paths:
        uri = f"replay:{path}"
        for attempt in (1, 2):
            code, doc, err = _profile_of(capsys, uri)
            if code != 0:
                problems.append(f"{path.name}: calibration {attempt} exit {code}: {err.strip()}")
                break
            profiles[Path(doc["profile_path"])] = path.name
    for profile, name in sorted(profiles.items()):
        code, out, err = run_cli(capsys, "profile", "show", profile, "--json")
        if code != 0:
            problems.append(f"{name}: profile show exit {code}: {err.strip()}")
            continue
        doc = json.loads(out)["profile"]
        for entry in (doc, *doc["workloads"].values()):
            model = entry.get("power_model")
            if model is not None and not model["p_idle_w"] >= 0:
                problems.append(f"{name}: fitted idle power {model['p_idle_w']} W")
    return problems


def test_every_real_sweep_calibrates_twice_and_every_profile_loads(capsys):
    sweeps = _real_sweeps()
    assert len(sweeps) >= 60  # the Titan X, A100, A40, A4000 and Jetson sweeps, each once
    assert _calibrate_twice(capsys, sweeps) == []


def _negative_intercept_sweeps(folder: Path):
    """V100-like tables (135-1530 MHz) whose power follows the ridge law with an intercept
    below zero, as real sweeps do whose activity falls with the clock: an unbounded fit
    reproduces it (a negative idle power), a bounded one cannot."""
    from governor.models import formulas

    clocks = np.arange(135.0, 1531.0, 7.5)
    rng = np.random.default_rng(39)
    paths = []
    for i, (idle_w, ridge_mhz, beta) in enumerate(
        [(-6.0, 950.0, 0.0015), (-4.0, 1100.0, 0.001), (-1.0, 900.0, 0.002), (3.0, 1000.0, 0.0)]
    ):
        power = formulas.power_w(clocks, idle_w, 0.12, ridge_mhz, beta)
        power = power * (1.0 + 0.005 * rng.standard_normal(len(clocks)))
        time = 1.0 / clocks + 4e-4
        path = folder / f"v100like_{i}.csv"
        rows = [f"{c:g},{p:.6g},{t:.6g}" for c, p, t in zip(clocks, power, time)]
        path.write_text("# device: V100-like\nclock_mhz,power_w,time_s\n" + "\n".join(rows))
        paths.append(path)
    return paths


def test_sweeps_whose_unbounded_fit_leaves_the_physical_region(capsys, tmp_path):
    from governor.models.power import fit_power_model

    paths = _negative_intercept_sweeps(tmp_path)
    # the unbounded law fits these rows with a negative intercept: the case at stake
    rows = read_sweep(paths[0])
    design = np.stack([np.ones(len(rows)), np.asarray(rows.clock_mhz)], 1)
    below = np.asarray(rows.clock_mhz) <= 900.0
    assert np.linalg.lstsq(design[below], np.asarray(rows.power_w)[below], rcond=None)[0][0] < 0
    for path in paths:  # every row fitted: physical, or no model (the best probe answers)
        rows = read_sweep(path)
        try:
            assert fit_power_model(rows.clock_mhz, rows.power_w).p_idle_w >= 0
        except CalibrationError as err:
            assert "does not explain the measurements" in str(err)
    assert _calibrate_twice(capsys, paths) == []
