"""``governor ros2`` as a process: --ros-args, Ctrl-C and SIGTERM restore the device and exit
0, and its --mcap recording reads back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ros_helpers import WAIT_S, wait_for

from governor.ros2.recording import read_messages

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "hardware"))
from hw_trees import build_agx_orin  # noqa: E402


def _node(*args: str, env=None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "governor", "ros2", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})),
        cwd=REPO,
    )


def _end(proc: subprocess.Popen, signum: int):
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - a hang is the failure
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"governor ros2 did not stop on signal {signum}:\n{err}") from None
    return proc.returncode, out, err


def test_sigint_stops_the_node_and_its_recording_reads_back(ros, tmp_path):
    record = tmp_path / "run.mcap"
    params = tmp_path / "governor.yaml"
    params.write_text("/robot1/governor:\n  ros__parameters:\n    clock_mhz: 510\n")
    proc = _node(
        "--device",
        "sim:orin-nano",
        "--policy",
        "clock",
        "--clock",
        "408",
        "--mcap",
        str(record),
        "--ros-args",
        "-r",
        "__ns:=/robot1",
        "--params-file",
        str(params),  # overrides win over the command line
        "-p",
        "rate_hz:=30",  # not used by the clock policy: kept
    )
    try:
        probe = ros.probe("/robot1/governor")
        wait_for(
            lambda: probe.values().get("policy") == "clock 510 MHz" and len(probe.power) >= 5,
            what="the node's topics under /robot1",
        )
        status = probe.last_status()
        assert status.name == "governor: sim:orin-nano" and status.hardware_id == "SIM-orin-nano"
        assert probe.values()["gpu clock (MHz)"] == "510"
        assert probe.get_parameters("rate_hz", "clock_mhz") == {"rate_hz": 30, "clock_mhz": 510}
        assert probe.set_parameters(cap_w=5, policy="power-cap")[0].successful
        wait_for(lambda: probe.values().get("policy") == "power-cap 5 W", what="re-targeting")
    finally:
        code, out, err = _end(proc, signal.SIGINT)
    assert code == 0, err
    assert "sim:orin-nano restored" in err and "Traceback" not in err

    messages = list(read_messages(record))  # every message decodes with the file's schemas
    topics = {topic for topic, _, _, _ in messages}
    assert topics == {"/diagnostics", "/robot1/governor/power", "/robot1/governor/battery"}
    for topic in topics:
        times = [ns for t, _, ns, _ in messages if t == topic]
        assert times == sorted(times) and len(set(times)) == len(times)
        assert abs(times[0] / 1e9 - time.time()) < 120  # wall-clock log times
    policies = [
        kv.value
        for t, _, _, m in messages
        if t == "/diagnostics"
        for s in m.status
        for kv in s.values
        if kv.key == "policy"
    ]
    assert policies[0] == "clock 510 MHz" and policies[-1] == "power-cap 5 W"


def test_sigterm_restores_a_jetsons_devfreq_files(ros, tmp_path):
    root = tmp_path / "root"
    info = build_agx_orin(root)  # MODE_30W: devfreq 306-612 MHz
    devfreq = root / info["node"].lstrip("/")

    def caps():
        try:
            return int((devfreq / "min_freq").read_text()), int((devfreq / "max_freq").read_text())
        except ValueError:  # being rewritten
            return None

    before = caps()
    env = {"GOVERNOR_SYSFS_ROOT": str(root), "GOVERNOR_STATE_DIR": str(tmp_path / "state")}
    proc = _node("--device", "jetson", "--policy", "clock", "--clock", "408", env=env)
    try:
        wait_for(lambda: caps() == (408000000, 408000000), what="the clock locked at 408 MHz")
        assert list((tmp_path / "state").glob("journal-*.json"))  # journaled on disk first
    finally:
        code, out, err = _end(proc, signal.SIGTERM)
    assert code == 0, err
    assert caps() == before
    assert not list((tmp_path / "state").glob("journal-*.json"))


def test_bad_ros_arguments_and_bad_parameters_are_one_line(ros):
    proc = _node("--device", "sim:orin-nano", "--policy", "power-cap")
    out, err = proc.communicate(timeout=WAIT_S * 2)
    assert proc.returncode == 2  # a usage error naming the option
    lines = [line for line in err.splitlines() if line.startswith("governor: error:")]
    assert len(lines) == 1 and "--cap-w" in lines[0], err
    proc = _node("--device", "sim:orin-nano", "stray")
    out, err = proc.communicate(timeout=WAIT_S * 2)
    assert proc.returncode == 2  # a usage error
    assert err.count("\n") == 1 and "--ros-args" in err


def test_without_rclpy_it_says_what_to_install():
    code = (
        "import sys; sys.modules['rclpy'] = None\n"  # import rclpy now fails as if absent
        "from governor.cli import main\n"
        "main(['ros2', '--device', 'sim:orin-nano'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=WAIT_S * 2,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "pip install 'gpu-governor[ros2]'" in lines[0] and "rclpy" in lines[0]


@pytest.mark.parametrize("virtual", [True, False])
def test_monitor_records_mcap_with_wall_clock_times(tmp_path, virtual):
    record = tmp_path / "monitor.mcap"
    device = "sim:orin-nano" if virtual else "sim:orin-nano?realtime=1"
    start = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "governor", "monitor", "--device", device, "--workload", "compute"]
        + ["--count", "6", "--interval-s", "0.2", "--json", "--mcap", str(record)],
        capture_output=True,
        text=True,
        timeout=WAIT_S * 4,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert proc.returncode == 0, proc.stderr
    messages = list(read_messages(record))
    assert len(messages) == 12
    by_topic = {}
    for topic, datatype, ns, msg in messages:
        by_topic.setdefault(topic, []).append((ns, datatype, msg))
    assert set(by_topic) == {"/diagnostics", "/governor/power"}
    for rows in by_topic.values():
        times = [ns for ns, _, _ in rows]
        steps = [(b - a) / 1e9 for a, b in zip(times, times[1:])]
        assert all(s == pytest.approx(0.2, abs=0.1 if not virtual else 1e-6) for s in steps)
        assert start - 1 <= times[0] / 1e9 <= time.time() + 1
    diag = by_topic["/diagnostics"][0]
    assert diag[1] == "diagnostic_msgs/msg/DiagnosticArray"
    assert diag[2].status[0].name == f"governor: {device}"
    assert diag[2].header.stamp.sec == diag[0] // 10**9
    powers = [m.data for _, _, m in by_topic["/governor/power"]]
    assert all(6.5 < w < 9.0 for w in powers)  # the Orin Nano's cpu+gpu+cv rail under load
