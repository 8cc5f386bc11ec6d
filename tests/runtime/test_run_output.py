"""``governor run`` keeps the job's output and its own report apart (a real subprocess, so the
job writes to the real file descriptors, as it does for a user)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
