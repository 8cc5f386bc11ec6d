"""Driver faults under the real nvidia-ml-py over the fake C driver, switched on while governor
runs: a GPU lost mid-job and before start, a flaky driver timing out on a share of calls, a
GPU that comes back. What the driver holds is read from the fake's state file, what is
journaled from the state directory, and the job's exit code from the process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import run_cli

import governor.devices.nvml as backend
from governor.devices.nvml_faults import ATTEMPTS, FaultCounter, call_nvml, kind_of
from governor.errors import DeviceLostError
from governor.paths import state_dir

T4_TOP_MHZ = 1590  # the fake T4's top graphics clock
A100_TOP_MHZ = 1410


@pytest.fixture
def nvml(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    return fake_nvml


def journals():
    directory = state_dir()
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("journal-*.json"))]


def governor_cli(nvml, *args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "governor", *args],
        env=nvml.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def lose_gpu_then(nvml, gpu, exit_code):
    """A job that loses GPU ``gpu`` (as the driver would, under the running governor), works
    on a little, then exits with ``exit_code``."""
    code = (
        f"import sys, time; open({str(nvml.faults_path)!r}, 'w').write('gpu.{gpu}.lost = 1')\n"
        f"time.sleep(0.5); sys.exit({exit_code})"
    )
    return [sys.executable, "-c", code]


def up_and_clocked(text):
    """From a scrape (read by prometheus-client's own parser): device -> governor_device_up,
    and the devices that have a clock series."""
    from prometheus_client.parser import text_string_to_metric_families

    up, clocked = {}, set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "governor_device_up":
                up[sample.labels["device"]] = sample.value
            if sample.name == "governor_clock_hertz":
                clocked.add(sample.labels["device"])
    return up, clocked


def test_errors_are_sorted_by_their_nvml_code():
    import pynvml

    assert kind_of(pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)) == "transient"
    assert kind_of(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_READY)) == "transient"
    assert kind_of(pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)) == "lost"
    assert kind_of(pynvml.NVMLError(pynvml.NVML_ERROR_RESET_REQUIRED)) == "lost"
    assert kind_of(pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)) == "permanent"
    assert kind_of(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)) == "permanent"


def test_retries_are_bounded_and_counted():
    import pynvml

    calls, waits = [], []

    def always_busy():
        calls.append(1)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)

    counter = FaultCounter()
    with pytest.raises(pynvml.NVMLError):
        call_nvml(pynvml, "nvml:0", counter, always_busy, sleep=waits.append)
    assert len(calls) == ATTEMPTS and counter.retries == ATTEMPTS - 1
    assert counter.failures == 1
    assert waits == sorted(waits) and waits[-1] == waits[0] * 2 ** (ATTEMPTS - 2)

    def lost():
        calls.append(1)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    calls.clear()
    with pytest.raises(DeviceLostError, match="nvml:0: the GPU is lost"):
        call_nvml(pynvml, "nvml:0", counter, lost, sleep=waits.append)
    assert len(calls) == 1  # no retry: it will not come back within milliseconds


def test_a_gpu_lost_mid_job_keeps_the_jobs_exit_code_and_its_journal(nvml, tmp_path, capsys):
    report = tmp_path / "report.json"
    done = governor_cli(
        nvml,
        "run", "--device", "nvml:0", "--policy", "max", "--json-out", str(report), "--",
        *lose_gpu_then(nvml, 0, 3),
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    # said once each: the loss when it happened, the failed restore at the end
    assert done.stderr.count("the GPU is lost (NVML nvmlDeviceGetFieldValues") == 1, done.stderr
    assert done.stderr.count("could not restore gpu_clocks") == 1, done.stderr
    assert "governor reset --device nvml:0" in done.stderr
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 3
    assert "the GPU is lost" in doc["device_lost"]
    assert "could not restore gpu_clocks" in doc["restore_failed"]
    # the driver still holds the clock the run set; the journal keeps what to put back
    assert nvml.gpu(0).gpu_locked == (A100_TOP_MHZ, A100_TOP_MHZ)
    (journal,) = journals()
    assert journal["layers"][-1]["original"] == {"gpu_clocks": None}
    # the GPU comes back: reset restores it from the journal
    nvml.faults()
    code, _, err = run_cli(capsys, "reset", "--device", "nvml:0")
    assert code == 0, err
    assert nvml.gpu(0).gpu_locked is None and journals() == []


def test_a_gpu_lost_before_start_is_one_line_and_nothing_runs(nvml, tmp_path):
    marker = tmp_path / "ran"
    nvml.faults(lost=[0])
    done = governor_cli(
        nvml, "run", "--device", "nvml:0", "--policy", "max", "--", "touch", str(marker)
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "nvml:0" in lines[0] and "GPU is lost" in lines[0], done.stderr
    assert not marker.exists()
    assert nvml.gpu(0).writes == 0 and journals() == []


def test_a_flaky_driver_costs_retries_not_the_job(nvml, tmp_path):
    nvml.faults(flaky={1: 3})  # every third call on the T4 times out
    report = tmp_path / "report.json"
    done = governor_cli(
        nvml,
        "run", "--device", "nvml:1", "--policy", "max", "--interval-s", "0.05",
        "--json-out", str(report), "--", "sleep", "1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(report.read_text())
    assert doc["transient_retries"] > 0 and doc["device_lost"] is None
    assert doc["restore_failed"] is None
    state = nvml.gpu(1)
    assert state.writes >= 2 and state.gpu_locked is None  # locked, then given back
    assert journals() == []


def test_monitor_rides_out_timeouts(nvml):
    nvml.faults(flaky={0: 2})  # every other call times out
    done = governor_cli(
        nvml, "monitor", "--device", "nvml:0", "--count", "3", "--interval-s", "0.01", "--json"
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(rows) == 3 and all(row["gpu_clock_mhz"] is not None for row in rows)


def test_monitor_skips_a_lost_gpu_once_and_says_when_it_is_back(nvml):
    # two GPUs; the A100 falls off the bus after the first round and comes back later
    proc = subprocess.Popen(
        [sys.executable, "-m", "governor", "monitor", "--device", "all", "--count", "60",
         "--interval-s", "0.1", "--json"],
        env=nvml.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line)["device"])
        if len(seen) == 4:
            nvml.faults(lost=[0])
        if seen[-6:] == ["nvml:1"] * 6:
            nvml.faults()
            break
    out, err = proc.communicate(timeout=60)
    seen += [json.loads(line)["device"] for line in out.splitlines()]
    assert proc.returncode == 0, err
    lost_lines = [line for line in err.splitlines() if "the GPU is lost" in line]
    assert len(lost_lines) == 1 and lost_lines[0].startswith("governor: nvml:0")
    assert "governor: nvml:0 answers again" in err
    assert seen.count("nvml:1") == 60  # the T4 never missed a round
    assert seen[-1] == "nvml:1" and "nvml:0" in seen[-3:]  # the A100 is back


def test_the_exporter_marks_a_lost_gpu_down_serves_the_other_and_brings_it_back(nvml, caplog):
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    import logging

    from prometheus_client import CollectorRegistry, generate_latest

    from governor.devices.registry import open_device
    from governor.runtime.exporter import DeviceCollector

    def scrape(collector):
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        return up_and_clocked(generate_latest(registry).decode())

    devices = [open_device("nvml:0"), open_device("nvml:1")]
    try:
        collector = DeviceCollector(devices)
        assert scrape(collector) == ({"nvml:0": 1.0, "nvml:1": 1.0}, {"nvml:0", "nvml:1"})
        nvml.faults(lost=[0])
        with caplog.at_level(logging.WARNING, logger="governor.runtime.exporter"):
            for _ in range(3):
                assert scrape(collector) == ({"nvml:0": 0.0, "nvml:1": 1.0}, {"nvml:1"})
            nvml.faults()
            assert scrape(collector) == ({"nvml:0": 1.0, "nvml:1": 1.0}, {"nvml:0", "nvml:1"})
        said = [r.getMessage() for r in caplog.records]
        assert len([m for m in said if "the GPU is lost" in m]) == 1  # once per episode
        assert "nvml:0: answers again" in said
    finally:
        for dev in devices:
            dev.close()
    assert [gpu.writes for gpu in nvml.state()] == [0, 0]  # scrapes only read


def test_an_exporter_started_with_a_gpu_already_lost_serves_it_down_then_up(nvml):
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    import os
    import urllib.request

    def scrape(url):
        return up_and_clocked(urllib.request.urlopen(url, timeout=10).read().decode())

    nvml.faults(lost=[0])  # off the bus before the exporter starts
    env = dict(nvml.env(), PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen(
        [sys.executable, "-m", "governor", "exporter", "--listen", "127.0.0.1:0", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = json.loads(proc.stdout.readline())
        assert started["devices"] == ["nvml:1"]
        for _ in range(2):
            assert scrape(started["url"]) == ({"nvml:0": 0.0, "nvml:1": 1.0}, {"nvml:1"})
        nvml.faults()  # back on the bus
        assert scrape(started["url"]) == ({"nvml:0": 1.0, "nvml:1": 1.0}, {"nvml:0", "nvml:1"})
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert err.count("nvml:0: down") == 1, err  # said once, not at every scrape
    assert [gpu.writes for gpu in nvml.state()] == [0, 0]  # scrapes only read


def test_a_full_state_directory_changes_nothing_and_says_where(nvml, capsys, monkeypatch):
    import errno
    import os

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", full)  # the journal's write reaches the disk last
        code, _, err = run_cli(capsys, "apply", "--device", "nvml:0", "--clock", "1005")
    assert code == 1
    (line,) = err.strip().splitlines()
    assert f"cannot write journal {state_dir()}" in line and "No space left on device" in line
    assert "nothing is changed without its journal" in line
    assert nvml.gpu(0).writes == 0 and nvml.gpu(0).gpu_locked is None


def test_a_read_only_state_directory_changes_nothing_and_says_where(nvml, capsys):
    import shutil

    directory = state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(directory)]).returncode != 0:
        pytest.skip("needs chattr +i (root, on a file system with attributes) to refuse root")
    try:
        code, _, err = run_cli(capsys, "apply", "--device", "nvml:0", "--clock", "1005")
    finally:
        subprocess.run([chattr, "-i", str(directory)], check=True)
    assert code == 1
    (line,) = err.strip().splitlines()
    assert str(directory) in line and "Operation not permitted" in line
    assert nvml.gpu(0).writes == 0 and nvml.gpu(0).gpu_locked is None


def test_apply_and_reset_on_a_lost_gpu_fail_in_one_line_and_keep_the_journal(nvml, capsys):
    code, _, err = run_cli(capsys, "apply", "--device", "nvml:1", "--clock", "1005")
    assert code == 0, err
    nvml.faults(lost=[1])
    code, _, err = run_cli(capsys, "apply", "--device", "nvml:1", "--clock", "900")
    assert code == 1
    (line,) = err.strip().splitlines()
    assert line.startswith("governor: error: nvml:1: the GPU is lost")
    code, _, err = run_cli(capsys, "reset", "--device", "nvml:1")
    assert code == 1 and "the GPU is lost" in err and "Traceback" not in err
    assert nvml.gpu(1).gpu_locked == (1005, 1005)  # the driver still holds the applied clock
    (journal,) = journals()
    assert journal["layers"][-1]["original"] == {"gpu_clocks": None}
    nvml.faults(flaky={1: 2})  # back, but its driver times out on every other call
    code, _, err = run_cli(capsys, "reset", "--device", "nvml:1")
    assert code == 0, err
    assert nvml.gpu(1).gpu_locked is None and journals() == []
