"""The Slurm wrappers in deploy/slurm/ as slurmd runs them: a cleared environment plus the
job's variables. The logic behind them (``governor slurm prolog|epilog``) is tested in
tests/fleet/test_slurm_jobs.py over the fake NVML driver, and under a real slurmd in
tests/fleet/test_real_services.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SLURM = REPO / "deploy" / "slurm"
BASH = shutil.which("bash")

pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def run_script(name, env, tmp):
    conf = tmp / "slurm.conf"
    if not conf.exists():
        conf.write_text("")
    base = {"GOVERNOR_SLURM_CONF": str(conf), "SLURM_JOB_ID": "4242"}
    base.update(env)
    return subprocess.run(
        [BASH, str(SLURM / name)], env=base, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def recorder(tmp_path):
    """A stand-in governor that records its arguments and part of its environment."""
    log = tmp_path / "calls.jsonl"
    fake = tmp_path / "fake-governor"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps([sys.argv[1:], os.environ.get('SLURM_JOB_GPUS')]) + '\\n')\n"
    )
    fake.chmod(0o755)
    return fake, lambda: [json.loads(x) for x in log.read_text().splitlines()]


def test_the_wrappers_run_governor_slurm_with_the_jobs_environment(recorder, tmp_path):
    fake, calls = recorder
    for name in ("prolog.sh", "epilog.sh"):
        out = run_script(name, {"GOVERNOR_BIN": str(fake), "SLURM_JOB_GPUS": "1"}, tmp_path)
        assert out.returncode == 0, out.stderr
    assert calls() == [[["slurm", "prolog"], "1"], [["slurm", "epilog"], "1"]]


def test_governor_is_found_by_the_conf_file_without_running_it(recorder, tmp_path):
    fake, calls = recorder
    (tmp_path / "slurm.conf").write_text(
        f'# site settings\nGOVERNOR_BIN="{fake}"  # absolute\n$(touch {tmp_path}/owned)\n'
    )
    assert run_script("prolog.sh", {}, tmp_path).returncode == 0
    assert calls()[0][0] == ["slurm", "prolog"] and not (tmp_path / "owned").exists()


def test_a_missing_governor_is_one_line_and_fails_only_when_strict(tmp_path):
    env = {"GOVERNOR_BIN": str(tmp_path / "nowhere")}
    out = run_script("prolog.sh", env, tmp_path)
    assert out.returncode == 0 and "is not an executable" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert run_script("prolog.sh", dict(env, GOVERNOR_STRICT="1"), tmp_path).returncode == 1


def test_the_example_conf_is_what_the_python_side_reads(tmp_path, monkeypatch):
    from governor.fleet.slurm import load_settings

    conf = SLURM / "slurm.conf.example"
    monkeypatch.setenv("GOVERNOR_STATE_DIR", str(tmp_path / "s"))
    settings = load_settings({"GOVERNOR_SLURM_CONF": str(conf)})
    assert settings.problems == () and settings.policy == "ppw"
    assert str(settings.record_dir) == "/var/lib/governor/jobs"


def test_the_documented_data_dir_puts_profiles_in_var_lib_governor_profiles(tmp_path):
    """slurm.conf.example's GOVERNOR_DATA_DIR, as the guide's calibrate command uses it, puts
    profiles in /var/lib/governor/profiles/, not .../profiles/profiles/ (issue 49)."""
    lines = (SLURM / "slurm.conf.example").read_text().splitlines()
    (value,) = [ln.split("=", 1)[1] for ln in lines if ln.startswith("GOVERNOR_DATA_DIR=")]
    root = tmp_path / "root"
    env = {
        "PATH": "/usr/bin:/bin",
        "GOVERNOR_DATA_DIR": str(root) + value,
        "GOVERNOR_STATE_DIR": str(tmp_path / "state"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "governor", "calibrate", "--device", "sim:nano"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr
    made = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.json"))
    assert made == ["var/lib/governor/profiles/nano.json"]
    guide = (REPO / "docs" / "guides" / "slurm.md").read_text()
    assert f"GOVERNOR_DATA_DIR={value} governor calibrate" in guide
