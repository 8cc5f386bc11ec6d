"""The PPW policy's (core, memory) pair on boards with a memory axis (issue 48 item 5): the
profile's pair, kept by ``governor calibrate``, is set by ``governor apply ppw``, by ``governor
run --policy ppw`` and by the Slurm prolog; ``--mem-clock`` pins memory and the policy then
sets the core clock alone; without a pair, or where the memory clock cannot be set, the core
clock alone as before. Every assertion reads the fake Jetson's files (the GPU's devfreq and
the BPMP's EMC clock) or the fake NVML driver's state, never the library's view."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli
from hw_trees import build_agx_orin, install_tools

import governor.devices.nvml as backend
from governor.paths import data_dir, state_dir

REPO = Path(__file__).resolve().parents[2]
CLK = "sys/kernel/debug/bpmp/debug/clk/emc"


def journals():
    directory = state_dir()
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("journal-*.json"))]


def _calibrate(capsys, board: str, uri: str, pair=None) -> dict:
    """Calibrate the simulated twin of ``board`` (same model, same tables) and make its
    profile the fake board's own (its fingerprint): the profile ``governor calibrate`` would
    write on ``uri``, with the pair under ``tuning.ppw-pair``. ``pair`` (core, memory MHz):
    the pair a calibration on the real board keeps, for a twin with one memory clock."""
    import governor
    from governor.profiles.profile import fingerprint

    code, out, err = run_cli(capsys, "calibrate", "--device", f"sim:{board}", "--json")
    assert code == 0, err
    doc = json.loads(out)
    path = data_dir() / "profiles" / f"{board}.json"
    profile = json.loads(path.read_text())
    if pair is not None:
        profile.setdefault("tuning", {})["ppw-pair"] = {
            doc["load"]["name"]: {"clock_mhz": pair[0], "mem_clock_mhz": pair[1]}
        }
        doc.update(ppw_optimal_clock_mhz=pair[0], ppw_optimal_mem_clock_mhz=pair[1])
    assert doc["ppw_optimal_mem_clock_mhz"] is not None, doc
    with governor.open_device(uri) as dev:
        profile["fingerprint"] = fingerprint(dev)
    path.write_text(json.dumps(profile))
    return doc


def _drop_pair(board: str) -> None:
    path = data_dir() / "profiles" / f"{board}.json"
    doc = json.loads(path.read_text())
    del doc["tuning"]["ppw-pair"]
    path.write_text(json.dumps(doc))


@pytest.fixture
def orin(tmp_path, monkeypatch):
    """A fake AGX Orin; returns a reader of (GPU devfreq min, max Hz, EMC locked, EMC rate Hz)."""
    root = tmp_path / "root"
    info = build_agx_orin(root, mode_cap_hz=1300500000)  # MAXN: the whole clock table
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    bin_dir = install_tools(tmp_path / "bin", node=info["node"])
    (bin_dir / "nvpmodel.state").write_text("0")  # the fake nvpmodel's mode: MAXN
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    gpu = root / "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu"

    def read():
        clk = root / CLK
        return (
            int((gpu / "min_freq").read_text()),
            int((gpu / "max_freq").read_text()),
            int((clk / "mrq_rate_locked").read_text()),
            int((clk / "rate").read_text()),
        )

    read.root = root
    return read


def test_apply_ppw_sets_the_pair_and_reset_restores_both(orin, capsys):
    before = orin()
    assert before[2:] == (0, 3199000000)  # BPMP scales the EMC: nothing locked
    pair = _calibrate(capsys, "agx-orin", "jetson")
    core, mem = pair["ppw_optimal_clock_mhz"], pair["ppw_optimal_mem_clock_mhz"]
    assert mem < 3199.0  # the board's default memory clock is not the pair's
    code, out, err = run_cli(capsys, "apply", "ppw", "--device", "jetson", "--json")
    assert code == 0, err
    assert orin() == (int(core * 1e6), int(core * 1e6), 1, int(mem * 1e6))
    assert f"the profile's PPW pair: {core:g} MHz core, {mem:g} MHz memory" in err
    doc = json.loads(out)
    assert doc["applied"]["mem_clock_mhz"] == mem and doc["guessed"] is False
    (journal,) = journals()  # both changes journaled before they were made
    originals = {k: v for layer in journal["layers"] for k, v in layer["original"].items()}
    assert originals["mem_clock"] is None
    code, _, err = run_cli(capsys, "reset", "--device", "jetson")
    assert code == 0, err
    assert orin()[:3] == (before[0], before[1], 0) and journals() == []  # EMC: BPMP's again


def test_apply_ppw_with_mem_clock_pins_memory_and_sets_the_core_calibration(orin, capsys):
    doc = _calibrate(capsys, "agx-orin", "jetson")
    code, _, err = run_cli(capsys, "apply", "ppw", "--device", "jetson", "--mem-clock", "3199")
    assert code == 0, err
    core = doc["ppw_optimal_clock_at_default_mem_mhz"]  # the core-only baseline's clock
    assert core != doc["ppw_optimal_clock_mhz"]
    assert orin() == (int(core * 1e6), int(core * 1e6), 1, 3199000000)
    assert "PPW pair" not in err


def test_apply_ppw_without_a_pair_sets_the_core_clock_alone(orin, capsys):
    doc = _calibrate(capsys, "agx-orin", "jetson")
    _drop_pair("agx-orin")
    code, _, err = run_cli(capsys, "apply", "ppw", "--device", "jetson")
    assert code == 0, err
    core = doc["ppw_optimal_clock_at_default_mem_mhz"]
    assert orin() == (int(core * 1e6), int(core * 1e6), 0, 3199000000)  # EMC untouched
    assert "PPW pair" not in err and "memory" not in err


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "governor", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=120,
    )


def _seen_script(orin, seen: Path) -> str:
    """A job that writes what it ran under: GPU devfreq min and max, EMC locked and rate."""
    gpu = orin.root / "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu"
    clk = orin.root / CLK
    files = [gpu / "min_freq", gpu / "max_freq", clk / "mrq_rate_locked", clk / "rate"]
    return "; ".join(f"cat {f} >> {seen}; echo >> {seen}" for f in files)


def test_run_ppw_runs_the_job_at_the_pair_and_restores_both(orin, capsys, tmp_path):
    before = orin()
    pair = _calibrate(capsys, "agx-orin", "jetson")
    core, mem = pair["ppw_optimal_clock_mhz"], pair["ppw_optimal_mem_clock_mhz"]
    seen, report = tmp_path / "seen", tmp_path / "report.json"
    done = _run("run", "--device", "jetson", "--policy", "ppw", "--json-out", str(report), "--")
    assert done.returncode == 2  # no command: usage (nothing touched)
    assert orin() == before and journals() == []
    done = _run(
        "run", "--device", "jetson", "--policy", "ppw", "--json-out", str(report), "--",
        "sh", "-c", _seen_script(orin, seen),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    hz = [int(x) for x in seen.read_text().split()]
    assert hz == [int(core * 1e6), int(core * 1e6), 1, int(mem * 1e6)]  # the job's clocks
    assert f"PPW pair: {core:g} MHz core at the pair's {mem:g} MHz memory clock" in done.stderr
    doc = json.loads(report.read_text())
    assert doc["mem_clock_mhz"] == mem
    assert orin()[:3] == (before[0], before[1], 0) and journals() == []  # both handed back


def test_run_ppw_with_mem_clock_governs_the_core_clock_alone(orin, capsys, tmp_path):
    pair = _calibrate(capsys, "agx-orin", "jetson")
    core = pair["ppw_optimal_clock_at_default_mem_mhz"]
    assert core != pair["ppw_optimal_clock_mhz"]
    seen = tmp_path / "seen"
    done = _run(
        "run", "--device", "jetson", "--policy", "ppw", "--mem-clock", "2133", "--",
        "sh", "-c", _seen_script(orin, seen),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [int(x) for x in seen.read_text().split()] == [
        int(core * 1e6), int(core * 1e6), 1, 2133000000
    ]  # fmt: skip
    assert "PPW pair" not in done.stderr
    assert "MHz, memory 2133 MHz; exit code 0" in done.stderr  # said in the report
    assert orin()[2] == 0 and journals() == []


def test_run_ppw_after_kill_9_is_restored_by_reset(orin, capsys, tmp_path):
    import signal
    import time

    before = orin()
    pair = _calibrate(capsys, "agx-orin", "jetson")
    mem = pair["ppw_optimal_mem_clock_mhz"]
    child = subprocess.Popen(
        [sys.executable, "-m", "governor", "run", "--device", "jetson", "--policy", "ppw"]
        + ["--", "sleep", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    try:

        def now():  # None while a file is being rewritten (truncated, then written)
            try:
                return orin()
            except ValueError:
                return None

        deadline = time.monotonic() + 60
        while True:
            seen = now()
            if seen is not None and seen[2:] == (1, int(mem * 1e6)) and seen[0] != before[0]:
                break
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "governor run never set the pair"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert orin()[2:] == (1, int(mem * 1e6))  # left behind, journaled
        code, _, err = run_cli(capsys, "reset", "--device", "jetson")
        assert code == 0, err
        assert orin()[:3] == (before[0], before[1], 0) and journals() == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_without_debugfs_ppw_sets_the_core_clock_alone_and_says_so_once(
    tmp_path, monkeypatch, capsys
):
    root = tmp_path / "root"
    info = build_agx_orin(root, mode_cap_hz=1300500000, emc=False)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    bin_dir = install_tools(tmp_path / "bin", node=info["node"])
    (bin_dir / "nvpmodel.state").write_text("0")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    pair = _calibrate(capsys, "agx-orin", "jetson")
    core = pair["ppw_optimal_clock_at_default_mem_mhz"]
    code, out, err = run_cli(capsys, "apply", "ppw", "--device", "jetson", "--json")
    assert code == 0, err
    gpu = root / "sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu"
    hz = int(core * 1e6)
    assert (gpu / "min_freq").read_text().strip() == (gpu / "max_freq").read_text().strip()
    assert int((gpu / "max_freq").read_text()) == hz
    assert err.count("needs the memory clock, which jetson cannot set") == 1
    assert f"the core clock alone at {core:g} MHz" in err
    assert "mem_clock_mhz" not in json.loads(out)["applied"]
    assert not (root / "sys/kernel/debug").exists()  # nothing written where there is none


@pytest.fixture
def nvml(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    return fake_nvml


def test_apply_ppw_locks_both_clocks_in_the_nvml_driver_and_reset_unlocks(nvml, capsys):
    pair = _calibrate(capsys, "t4", "nvml:1", pair=(585.0, 405.0))
    core = pair["ppw_optimal_clock_mhz"]
    assert pair["ppw_optimal_clock_at_default_mem_mhz"] != core
    code, _, err = run_cli(capsys, "apply", "ppw", "--device", "nvml:1")
    assert code == 0, err
    assert nvml.gpu(1).gpu_locked == (int(core), int(core))
    assert nvml.gpu(1).mem_locked == (405, 405)
    code, _, err = run_cli(capsys, "reset", "--device", "nvml:1")
    assert code == 0, err
    assert nvml.gpu(1).gpu_locked is None and nvml.gpu(1).mem_locked is None
    assert journals() == []


def _driver_state(text: str, index: int) -> dict:
    """GPU ``index``'s locks in a copy of the fake driver's state file."""
    rows = [line.split() for line in text.splitlines() if line.startswith("gpu ")]
    values = dict(word.split("=", 1) for word in rows[index][2:])
    return {k: values[k] for k in ("gpu_locked", "mem_locked")}


def test_run_ppw_on_nvml_whose_core_table_changes_with_memory_sets_the_core_alone(
    nvml, capsys, tmp_path
):
    # the T4's core clocks at 405 MHz memory are 300-585 MHz, not the 300-1590 MHz its
    # profile was calibrated on: run holds the core calibration's clock and says so once
    doc = _calibrate(capsys, "t4", "nvml:1", pair=(585.0, 405.0))
    core = int(doc["ppw_optimal_clock_at_default_mem_mhz"])
    seen = tmp_path / "seen"
    env = nvml.env()
    env["PYTHONPATH"] = str(REPO)  # the child is root as this process is, or it could not lock
    done = subprocess.run(
        [sys.executable, "-m", "governor", "run", "--device", "nvml:1", "--policy", "ppw"]
        + ["--", "sh", "-c", f'cp "$FAKE_NVML_STATE" {seen}'],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert _driver_state(seen.read_text(), 1) == {
        "gpu_locked": f"{core},{core}",
        "mem_locked": "0,0",
    }  # what the driver held while the job ran
    assert done.stderr.count("core clocks change with its memory clock") == 1
    assert nvml.gpu(1).gpu_locked is None and nvml.gpu(1).mem_locked is None
    assert journals() == []


def test_a_pair_whose_core_clock_the_memory_clock_does_not_offer_is_not_set(nvml, capsys):
    _calibrate(capsys, "t4", "nvml:1", pair=(900.0, 405.0))  # 300-585 MHz at 405 memory
    code, _, err = run_cli(capsys, "apply", "ppw", "--device", "nvml:1")
    assert code == 0, err
    assert "at 405 MHz memory it offers 300-585 MHz core" in err
    assert nvml.gpu(1).mem_locked is None and nvml.gpu(1).gpu_locked is not None
