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


def _calibrate(capsys, board: str, uri: str) -> dict:
    """Calibrate the simulated twin of ``board`` (same model, same tables) and make its
    profile the fake board's own (its fingerprint): the profile ``governor calibrate`` would
    write on ``uri``, with the pair under ``tuning.ppw-pair``."""
    import governor
    from governor.profiles.profile import fingerprint

    code, out, err = run_cli(capsys, "calibrate", "--device", f"sim:{board}", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ppw_optimal_mem_clock_mhz"] is not None, doc
    path = data_dir() / "profiles" / f"{board}.json"
    profile = json.loads(path.read_text())
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
