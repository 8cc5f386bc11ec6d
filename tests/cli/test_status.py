"""``governor status``: per device, the settings in force, who set them and what ``reset``
would restore, over the real nvidia-ml-py and the fake driver; it changes nothing (the fake
driver's write count, the journal and lock files are compared byte for byte)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pynvml
from cli_helpers import run_cli

from governor.paths import state_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))  # hw_trees


def _files():
    """Every file in the state directory, with its bytes."""
    base = state_dir()
    return {p.name: p.read_bytes() for p in sorted(base.glob("*"))} if base.exists() else {}


def _status(capsys, *args):
    code, out, err = run_cli(capsys, "status", "--json", *args)
    assert code == 0, err
    doc = json.loads(out)
    return {d["device"]: d for d in doc["devices"]}, doc


def _setting(doc, field):
    return next(row for row in doc["settings"] if row["field"] == field)


def test_status_names_apply_another_program_and_what_reset_restores(fake_nvml, capsys):
    done = subprocess.run(
        [sys.executable, "-m", "governor", "apply", "--device", "nvml:0", "--clock", "1005"],
        env=fake_nvml.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    locked = fake_nvml.gpu(0).gpu_locked
    assert locked is not None
    # another program locks GPU 1's clocks straight through NVML: no journal of ours
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(1)
        pynvml.nvmlDeviceSetGpuLockedClocks(handle, 900, 900)
    finally:
        pynvml.nvmlShutdown()
    writes = [g.writes for g in fake_nvml.state()]
    before = _files()

    devices, doc = _status(capsys)

    assert [g.writes for g in fake_nvml.state()] == writes  # nothing was written to a GPU
    assert _files() == before  # nor to a journal or lock file
    gpu0, gpu1 = devices["nvml:0"], devices["nvml:1"]
    clocks0 = _setting(gpu0, "gpu_clocks")
    # NVML has no getter for locked clocks: the value is what apply's journal layer set
    assert clocks0["value"] == list(locked) and clocks0["readable"] is False
    assert clocks0["set_by"]["who"] == "governor apply" and clocks0["set_by"]["alive"] is False
    assert gpu0["reset_restores"] == {"gpu_clocks": None}  # apply's original: not locked
    assert gpu0["layers"][0]["persistent"] is True
    # ... so another program's lock on GPU 1 cannot be seen, and is not claimed either way
    clocks1 = _setting(gpu1, "gpu_clocks")
    assert clocks1["value"] is None and clocks1["set_by"] is None
    assert clocks1["at_default"] is None and clocks1["readable"] is False
    assert gpu1["reset_restores"] == {} and gpu1["layers"] == []
    assert _setting(gpu1, "power_limit")["at_default"] is True
    assert doc["journals_without_device"] == []

    code, out, _err = run_cli(capsys, "status", "--device", "nvml:0")
    assert code == 0
    assert "set by governor apply (pid" in out and "exited)" in out
    assert "reset would restore gpu clocks driver default" in out

    # after reset no journal layer claims it (NVML itself cannot tell: unknown, not default)
    assert run_cli(capsys, "reset", "--device", "nvml:0")[0] == 0
    assert fake_nvml.gpu(0).gpu_locked is None
    devices, _ = _status(capsys, "--device", "nvml:0")
    clocks0 = _setting(devices["nvml:0"], "gpu_clocks")
    assert clocks0["value"] is None and clocks0["set_by"] is None
    assert clocks0["at_default"] is None
    assert devices["nvml:0"]["layers"] == []


def test_a_corrupt_journal_is_reported_and_left_where_it_is(fake_nvml, capsys):
    assert run_cli(capsys, "apply", "--device", "nvml:0", "--clock", "1005")[0] == 0
    (journal,) = sorted(state_dir().glob("journal-*.json"))
    journal.write_bytes(journal.read_bytes()[:-20])  # torn
    before = _files()

    devices, _ = _status(capsys, "--device", "nvml:0")

    assert _files() == before  # not set aside: status only reads
    gpu0 = devices["nvml:0"]
    assert gpu0["journal_problem"]
    assert gpu0["reset_restores"]["gpu_clocks"] is None  # reset would restore the defaults
    code, out, _ = run_cli(capsys, "status", "--device", "nvml:0")
    assert code == 0 and "reset would set it aside and restore" in out
    assert run_cli(capsys, "reset", "--device", "nvml:0")[0] == 0  # the test leaves it clean


def test_a_journal_whose_device_is_gone_is_listed(fake_nvml, capsys):
    assert run_cli(capsys, "apply", "--device", "nvml:1", "--clock", "1005")[0] == 0
    fake_nvml.configure(count=1)  # GPU 1 is no longer there
    devices, doc = _status(capsys)
    assert list(devices) == ["nvml:0"]
    (gone,) = doc["journals_without_device"]
    assert gone["reset_restores"] == {"gpu_clocks": None}
    assert gone["layers"][0]["owner"]["who"] == "governor apply"


def test_an_unknown_device_is_one_line_and_exit_2(capsys):
    code, out, err = run_cli(capsys, "status", "--device", "nvml:7")
    assert code != 0 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_simulated_board_says_it_keeps_nothing(capsys):
    code, out, _ = run_cli(capsys, "status", "--device", "sim:agx-orin")
    assert code == 0 and "nothing is set between commands" in out
    devices, _ = _status(capsys, "--device", "sim:agx-orin")
    assert devices["sim:agx-orin"]["keeps_state"] is False


def test_on_a_jetson_another_programs_clock_is_seen_and_left_to_it(tmp_path, monkeypatch, capsys):
    """Jetson's devfreq files read back: a cap written by another program (here, straight
    into the files, as jetson_clocks would) is named as such, and reset would not touch it."""
    from hw_trees import build_agx_orin, install_tools

    root = tmp_path / "root"
    info = build_agx_orin(root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    bin_dir = install_tools(tmp_path / "bin", node=info["node"])
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    node = root / info["node"].lstrip("/")
    (node / "min_freq").write_text("510000000\n")
    (node / "max_freq").write_text("510000000\n")
    before = ((node / "min_freq").read_text(), (node / "max_freq").read_text())

    devices, _ = _status(capsys, "--device", "jetson")

    (orin,) = devices.values()
    clocks = _setting(orin, "gpu_clocks")
    assert clocks["value"] == [510.0, 510.0] and clocks["readable"] is True
    assert clocks["set_by"]["who"].startswith("another program")
    assert orin["reset_restores"] == {}
    assert ((node / "min_freq").read_text(), (node / "max_freq").read_text()) == before

    # governor's own change on top is named as apply's, and reset would put 510 back
    assert run_cli(capsys, "apply", "--device", "jetson", "--clock", "408")[0] == 0
    devices, _ = _status(capsys, "--device", "jetson")
    (orin,) = devices.values()
    assert _setting(orin, "gpu_clocks")["set_by"]["who"] == "governor apply"
    assert orin["reset_restores"] == {"gpu_clocks": [510.0, 510.0]}
    assert run_cli(capsys, "reset", "--device", "jetson")[0] == 0
    assert (node / "max_freq").read_text().strip() == "510000000"
