"""``governor run`` keeps the job's output and its own report apart (a real subprocess, so the
job writes to the real file descriptors, as it does for a user)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

JOB = "import sys; print('job says hi'); print('job warns', file=sys.stderr); sys.exit(4)"


def _governor(*args, tmp_path):
    env = dict(os.environ)
    env["GOVERNOR_STATE_DIR"] = str(tmp_path / "state")
    env["GOVERNOR_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "governor",
            "run",
            "--device",
            "sim:agx-orin",
            "--policy",
            "max",
            *args,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_job_output_passes_through_and_the_report_goes_to_stderr(tmp_path):
    p = _governor("--", sys.executable, "-c", JOB, tmp_path=tmp_path)
    assert p.returncode == 4
    assert p.stdout == "job says hi\n"
    assert "job warns\n" in p.stderr and "exit code 4" in p.stderr


def test_json_out_writes_the_report_to_a_file_and_leaves_stdout_to_the_job(tmp_path):
    report = tmp_path / "report.json"
    p = _governor("--json-out", report, "--", sys.executable, "-c", JOB, tmp_path=tmp_path)
    assert p.returncode == 4
    assert p.stdout == "job says hi\n"
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 4 and doc["device"] == "sim:agx-orin"


def test_json_on_stdout_only_when_the_jobs_stdout_goes_elsewhere(tmp_path):
    job_out = tmp_path / "job.out"
    p = _governor("--json", "--stdout", job_out, "--", sys.executable, "-c", JOB, tmp_path=tmp_path)
    assert p.returncode == 4
    assert json.loads(p.stdout)["exit_code"] == 4  # stdout is the report and nothing else
    assert job_out.read_text() == "job says hi\n"
    assert "job warns\n" in p.stderr


def test_json_that_would_mix_is_a_usage_error_before_the_job_runs(tmp_path):
    marker = tmp_path / "ran"
    p = _governor(
        "--json", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')", tmp_path=tmp_path
    )
    assert p.returncode == 2
    assert "--json-out FILE" in p.stderr and p.stderr.count("\n") == 1
    assert not marker.exists()


def test_the_jobs_own_json_flag_is_not_governors(tmp_path):
    p = _governor(
        "--", sys.executable, "-c", "import sys; print(sys.argv[1:])", "--json", tmp_path=tmp_path
    )
    assert p.returncode == 0 and p.stdout == "['--json']\n"


def test_battery_run_reads_the_real_battery_when_there_is_one(tmp_path, capsys, monkeypatch):
    from cli_helpers import run_cli

    bat = tmp_path / "root/sys/class/power_supply/BAT0"
    bat.mkdir(parents=True)
    (bat / "type").write_text("Battery\n")
    (bat / "energy_now").write_text("20000000\n")  # 20 Wh
    (bat / "energy_full").write_text("50000000\n")
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(tmp_path / "root"))
    args = ["run", "--device", "sim:orin-nano", "--policy", "battery", "--hours", "1"]
    code, _, err = run_cli(capsys, *args, "--", "true")
    assert code == 0, err
    assert "reading battery BAT0 (20.0 Wh left)" in err
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(tmp_path / "nothing"))
    code, _, err = run_cli(capsys, *args, "--", "true")
    assert code == 2 and "needs --battery-wh" in err and err.count("\n") == 1


def test_simulate_scope_reports_board_and_gpu_figures(capsys):
    from cli_helpers import run_cli

    base = ["simulate", "--board", "agx-orin", "--duration-s", "30", "--json"]
    code, out, _ = run_cli(capsys, *base, "--policy", "clock", "--clock", "900")
    fixed = json.loads(out)
    assert code == 0 and fixed["board_energy_j"] > fixed["energy_j"] > fixed["gpu_energy_j"]
    code, out, _ = run_cli(capsys, *base, "--policy", "battery", "--battery-wh", "0.15")
    board = json.loads(out)
    assert board["scope"] == "board input" and board["energy_j"] == board["board_energy_j"]
    assert board["board_energy_j"] <= 1.01 * 540 and board["budget_j"] == pytest.approx(540)
    code, out, _ = run_cli(
        capsys, *base, "--policy", "battery", "--battery-wh", "0.15", "--scope", "gpu"
    )
    gpu = json.loads(out)
    assert gpu["scope"] == "gpu+soc" and gpu["energy_j"] <= 1.01 * 540
    assert gpu["board_energy_j"] > 1.2 * 540  # the GPU figure's budget lets the board overspend
    code, _, err = run_cli(
        capsys, *base, "--policy", "battery", "--battery-wh", "1", "--scope", "x"
    )
    assert code == 2 and "board or gpu" in err


def test_a_job_shorter_than_one_control_period_reports_its_energy(tmp_path):
    """``governor run -- true`` ends before the first control step: the report still holds
    the energy from start to exit (duration × the simulated board's power), not 0 J."""
    report = tmp_path / "report.json"
    p = _governor("--interval-s", "5", "--json-out", report, "--", "true", tmp_path=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(report.read_text())
    assert 0 < doc["duration_s"] < 5
    assert doc["energy_j"] > 0
    # watts, not milliwatts (the rail's filtered reading may not have risen to the load's
    # power within a job of a few milliseconds: at least the GPU rail's idle power)
    assert 1 < doc["energy_j"] / doc["duration_s"] < 200
    assert doc["mean_power_w"] == pytest.approx(doc["energy_j"] / doc["duration_s"])


def test_a_short_job_on_nvml_matches_the_drivers_energy_counter(fake_nvml, tmp_path):
    """A job that ends before the first control step (here 50 ms, the period is 100 ms) used to
    be reported as 0 J: the report was read before the last period was closed. The fake
    driver's energy counter runs at its configured power, so the energy must match it."""
    from fakes.nvml import Gpu

    fake_nvml.configure(Gpu(power_mw=150000, average_mw=150000, instant_mw=150000))
    env = dict(fake_nvml.env())
    env["GOVERNOR_STATE_DIR"] = str(tmp_path / "state")
    env["GOVERNOR_DATA_DIR"] = str(tmp_path / "data")
    report = tmp_path / "report.json"
    job = [sys.executable, "-c", "import time; time.sleep(0.05)"]
    p = subprocess.run(
        [sys.executable, "-m", "governor", "run", "--device", "nvml:0", "--policy", "max"]
        + ["--json-out", str(report), "--"]
        + job,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(report.read_text())
    assert 0.05 <= doc["duration_s"] < 5.0
    # the counter counts whole milliseconds of 150 W: within 2 ms of the true duration
    assert abs(doc["energy_j"] - 150.0 * doc["duration_s"]) <= 150.0 * 0.002 + 1e-9
    assert fake_nvml.gpu(0).gpu_locked is None  # and the clocks were given back
