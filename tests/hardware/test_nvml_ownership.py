"""One owner per physical GPU, through the real nvidia-ml-py over the fake C driver: two GPUs,
every spelling (index, zero-padded index, UUID, PCI bus id, with and without
``CUDA_VISIBLE_DEVICES``), governors in other processes. What the driver did is read from
the fake's state file; what is journaled, from the files in the state directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from cli_helpers import run_cli
from fakes.nvml import A100, T4

import governor.devices.nvml as backend
from governor.paths import state_dir


@pytest.fixture
def nvml(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    return fake_nvml


def journals():
    directory = state_dir()
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("journal-*.json"))]


@pytest.fixture
def governed(nvml):
    """``governor run --device nvml:0 --policy max`` in another process, holding the A100."""
    cmd = [sys.executable, "-m", "governor", "run", "--device", "nvml:0", "--policy", "max"]
    proc = subprocess.Popen(
        [*cmd, "--", sys.executable, "-c", "import time; time.sleep(120)"],
        env=nvml.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60

    def noted():  # the journal says what it set: written after the driver call (a test that
        # read it between the two, on a loaded CI machine, saw it change under it)
        return any("gpu_clocks" in d["layers"][-1].get("applied", {}) for d in journals())

    while not nvml.state() or nvml.gpu(0).gpu_locked is None or not noted():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the governor never locked the A100"
        time.sleep(0.05)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


SPELLINGS = ["nvml:0", "nvml:00", "nvml:" + A100["uuid"], "nvml:07:00.0", "nvml:" + A100["pci"]]


def test_every_spelling_of_a_busy_gpu_is_refused_and_nothing_changes(nvml, governed, capsys):
    held = nvml.gpu(0)
    assert held.gpu_locked == (1410, 1410)
    (doc,) = journals()
    assert doc["key"] == "nvml:" + A100["uuid"] and doc["layers"][0]["owner"]["pid"] == governed.pid
    for uri in SPELLINGS:
        code, _, err = run_cli(capsys, "apply", "--device", uri, "--clock", "1005")
        assert code == 1, uri
        assert f"pid {governed.pid}" in err and err.count("\n") == 1, err
    assert nvml.gpu(0) == held  # not one write reached the A100
    assert journals() == [doc]


def test_cuda_visible_devices_does_not_renumber_nvml(nvml, governed, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # CUDA would call the T4 device 0
    code, _, err = run_cli(capsys, "apply", "--device", "nvml:0", "--clock", "1005")
    assert code == 1 and f"pid {governed.pid}" in err  # nvml:0 is still the A100, held
    code, _, err = run_cli(capsys, "apply", "--device", "nvml:1", "--power-limit", "65")
    assert code == 0, err  # the other GPU is free: its text "nvml:1" is not the A100's lock
    assert nvml.gpu(1).power_limit_mw == 65000 and nvml.gpu(0).gpu_locked == (1410, 1410)
    code, _, err = run_cli(capsys, "reset", "--device", "nvml:" + T4["uuid"])
    assert code == 0, err  # the journal written as nvml:1 is found by the T4's UUID
    assert nvml.gpu(1).power_limit_mw == 70000


def test_reading_the_busy_gpu_undoes_nothing(nvml, governed, capsys):
    held, before = nvml.gpu(0), journals()
    for args in (
        ["devices", "--json"],
        ["monitor", "--device", "nvml:0", "-n", "1", "--json"],
        ["doctor", "--json"],
    ):
        code, _, err = run_cli(capsys, *args)
        assert code == 0, err
    import governor

    with governor.open_device("nvml:" + A100["uuid"]) as dev:
        assert dev.sample().gpu_clock_mhz == 1410
    assert nvml.gpu(0) == held and journals() == before


def test_reset_under_a_cuda_visible_devices_mismatch_restores_the_right_gpu(
    nvml, capsys, monkeypatch
):
    code, _, err = run_cli(capsys, "apply", "--device", "nvml:1", "--power-limit", "65")
    assert code == 0, err
    assert nvml.gpu(1).power_limit_mw == 65000
    a100 = nvml.gpu(0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    code, out, err = run_cli(capsys, "reset", "--all", "--json")
    assert code == 0, err
    (report,) = json.loads(out)["devices"]
    assert report["device"] == "nvml:" + T4["uuid"] and report["restored"] == {"power_limit": 70.0}
    assert nvml.gpu(1).power_limit_mw == 70000
    assert nvml.gpu(0) == a100  # GPU 0 untouched: no write at all
    assert journals() == []


def test_a_killed_governor_is_undone_by_the_next_owner_and_says_so(nvml, governed, capsys):
    governed.kill()
    governed.wait()
    assert nvml.gpu(0).gpu_locked == (1410, 1410)  # the driver keeps the dead governor's lock
    code, out, err = run_cli(capsys, "apply", "--device", "nvml:" + A100["pci"], "--clock", "1005")
    assert code == 0, err
    assert f"pid {governed.pid}" in err and "ended without restoring" in err
    assert nvml.gpu(0).gpu_locked == (1005, 1005)
    code, out, err = run_cli(capsys, "reset", "--device", "nvml:0", "--json")
    assert code == 0, err
    assert nvml.gpu(0).gpu_locked is None and journals() == []


# -- every GPU of a host -----------------------------------------------------------------------
def test_device_all_reaches_every_gpu(nvml, capsys, tmp_path):
    code, out, err = run_cli(capsys, "devices", "--device", "all", "--json")
    assert code == 0, err
    assert [d["uri"] for d in json.loads(out)["devices"]] == ["nvml:0", "nvml:1"]
    code, out, err = run_cli(
        capsys, "monitor", "--device", "all", "-n", "2", "--json", "--interval-s", "0.01"
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["device"] for line in lines] == ["nvml:0", "nvml:1"] * 2
    code, out, err = run_cli(capsys, "apply", "max", "--device", "all", "--json")
    assert code == 0, err
    assert (nvml.gpu(0).gpu_locked, nvml.gpu(1).gpu_locked) == ((1410, 1410), (1590, 1590))
    assert len(json.loads(out)["devices"]) == 2
    code, out, err = run_cli(capsys, "reset", "--device", "all", "--json")
    assert code == 0, err
    assert (nvml.gpu(0).gpu_locked, nvml.gpu(1).gpu_locked) == (None, None)
    assert journals() == []
    seen = tmp_path / "seen"
    code, out, err = run_cli(
        capsys,
        "run",
        "--device",
        "all",
        "--policy",
        "max",
        "--json",
        "--stdout",
        os.devnull,
        "--",
        sys.executable,
        "-c",
        f"import sys; open({str(seen)!r}, 'w').write(open({str(nvml.state_path)!r}).read())",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert [d["device"] for d in doc["devices"]] == ["nvml:0", "nvml:1"]
    during = seen.read_text()
    assert "1410" in during and "1590" in during  # both GPUs were governed while the job ran
    assert (nvml.gpu(0).gpu_locked, nvml.gpu(1).gpu_locked) == (None, None)


def test_apply_to_all_is_all_or_nothing(nvml, capsys):
    # 380 W suits the A100 (100-400 W) but not the T4 (60-70 W): neither keeps a change
    code, _, err = run_cli(capsys, "apply", "--power-limit", "380", "--device", "all")
    assert code == 1 and "T4" in err
    assert nvml.gpu(0).power_limit_mw == 400000 and nvml.gpu(1).power_limit_mw == 70000
    assert journals() == []


def test_mig_instances_are_listed_under_their_gpu_with_whole_gpu_power(nvml, capsys):
    from fakes.nvml import Gpu

    mig = "MIG-c0ffee00-1111-5222-8333-444444444444"
    nvml.configure(Gpu(mig=[mig]), Gpu())
    code, out, err = run_cli(capsys, "devices", "--json")
    assert code == 0, err
    rows = {r["uri"]: r for r in json.loads(out)["devices"]}
    assert rows["nvml:0"]["parts"] == [
        {"uri": "nvml:" + mig, "name": "MIG instance 0", "power_scope": "whole GPU"}
    ]
    code, out, err = run_cli(capsys, "monitor", "--device", "nvml:" + mig, "-n", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["scope"] == "whole GPU"


def test_run_over_apply_gives_back_the_applied_clock_although_nvml_cannot_read_it(nvml, capsys):
    assert run_cli(capsys, "apply", "--device", "nvml:1", "--clock", "1005")[0] == 0
    assert nvml.gpu(1).gpu_locked == (1005, 1005)
    seen = []
    cmd = [sys.executable, "-m", "governor", "run", "--device", "nvml:1", "--policy", "max", "--"]
    probe = f"print(open({str(nvml.state_path)!r}).read())"
    done = subprocess.run(
        [*cmd, sys.executable, "-c", probe],
        env=nvml.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    seen.append(done.stdout)
    assert "1590" in seen[0]  # the run held the T4 at its top clock
    assert nvml.gpu(1).gpu_locked == (1005, 1005)  # and gave the applied clock back
    (doc,) = journals()
    assert [layer["original"] for layer in doc["layers"]] == [{"gpu_clocks": None}]
    assert run_cli(capsys, "reset", "--device", "nvml:1")[0] == 0
    assert nvml.gpu(1).gpu_locked is None and journals() == []
