"""Setting up a node: calibrate each new board once (--if-missing), and the exporter's
metrics from a scrape of every GPU of the fake driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from cli_helpers import run_cli
from fakes.nvml import A100, T4

REPO = Path(__file__).resolve().parents[2]


def test_calibrate_if_missing_calibrates_each_board_once(capsys):
    devices = "sim:a100-pcie,sim:a100-pcie?seed=2,sim:t4"
    code, out, err = run_cli(capsys, "calibrate", "--device", devices, "--if-missing", "--json")
    assert code == 0, err
    first = [d["skipped"] for d in json.loads(out)["devices"]]
    assert first == [False, True, False]  # the second A100 is the same board
    code, out, err = run_cli(capsys, "calibrate", "--device", devices, "--if-missing", "--json")
    assert code == 0, err
    assert all(d["skipped"] for d in json.loads(out)["devices"])
    code, out, _ = run_cli(capsys, "calibrate", "--device", "sim:t4", "--if-missing")
    assert code == 0 and "calibrated before" in out


def test_the_exporter_serves_every_gpu_with_units_in_the_names(fake_nvml, tmp_path):
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    records = tmp_path / "jobs" / "running"
    records.mkdir(parents=True)
    (records / "77.json").write_text(
        json.dumps({"job_id": "77", "policy": "ppw", "gpus": [{"uuid": T4["uuid"]}]})
    )
    env = fake_nvml.env(dict(os.environ, PYTHONPATH=str(REPO)))
    env["GOVERNOR_RECORD_DIR"] = str(tmp_path / "jobs")
    proc = subprocess.Popen(
        [sys.executable, "-m", "governor", "exporter", "--listen", "127.0.0.1:0", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = json.loads(proc.stdout.readline())
        text = urllib.request.urlopen(started["url"], timeout=10).read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert proc.returncode == 0
    lines = [x for x in text.splitlines() if x and not x.startswith("#")]

    def value(prefix, uuid):
        (line,) = [x for x in lines if x.startswith(prefix + "{") and f'uuid="{uuid}"' in x]
        return line, float(line.rsplit(" ", 1)[1])

    line, watts = value("governor_power_watts", T4["uuid"])
    assert watts == 27.0 and 'board="t4"' in line and 'scope="gpu"' in line and 'rail="gpu"' in line
    _, joules = value("governor_energy_joules_total", A100["uuid"])
    assert joules > 100_000  # the fake counter starts at 123456.789 J
    line, _ = value("governor_policy_info", T4["uuid"])
    assert 'policy="ppw"' in line and 'source="slurm job 77"' in line
    line, _ = value("governor_policy_info", A100["uuid"])
    assert 'policy="none"' in line
    _, celsius = value("governor_temperature_celsius", A100["uuid"])
    assert celsius == 33.0
    hertz = [x for x in lines if x.startswith("governor_clock_hertz{")]
    assert len(hertz) == 4 and all(float(x.rsplit(" ", 1)[1]) > 1e8 for x in hertz)
    assert "# TYPE governor_energy_joules_total counter" in text


def test_without_prometheus_client_the_exporter_says_what_to_install(tmp_path):
    blocker = tmp_path / "prometheus_client.py"
    blocker.write_text("raise ImportError('blocked for this test')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}:{REPO}")
    out = subprocess.run(
        [sys.executable, "-m", "governor", "exporter", "--device", "sim:t4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "governor: error: the metrics exporter needs prometheus-client: "
        "pip install 'gpu-governor[metrics]'"
    )


def test_the_daemon_serves_the_same_metrics_with_its_policy_and_budget():
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    import tempfile

    from governor.runtime.daemon.config import parse_config
    from governor.runtime.daemon.server import DaemonServer

    sockdir = Path(tempfile.mkdtemp(prefix="gvm-"))
    cfg = parse_config(
        f'[daemon]\nsocket = "{sockdir}/g.sock"\nmetrics_listen = "127.0.0.1:0"\n'
        '[policy]\npolicy = "battery"\nbattery_wh = 2.0\nhours = 1.0\n'
        '[[device]]\nuri = "sim:t4"\n[[device]]\nuri = "sim:a100-pcie"\n'
        '[device.policy]\npolicy = "ppw"\n',
        "site.toml",
    )
    assert cfg.to_dict()["metrics_listen"] == "127.0.0.1:0"
    server = DaemonServer(cfg).start_in_thread()
    try:
        url = f"http://127.0.0.1:{server._metrics.port}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    finally:
        server.stop()
    info = [x for x in text.splitlines() if x.startswith("governor_policy_info{")]
    assert any('device="sim:t4"' in x and 'policy="battery"' in x for x in info)
    assert any('device="sim:a100-pcie"' in x and 'policy="ppw"' in x for x in info)
    budget = [x for x in text.splitlines() if x.startswith("governor_budget_remaining_joules{")]
    assert len(budget) == 1 and 'device="sim:t4"' in budget[0]
    assert 0 < float(budget[0].rsplit(" ", 1)[1]) <= 7200.0


def test_a_bad_metrics_address_is_named_in_the_config_error():
    from governor.runtime.daemon.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match="daemon.metrics_listen"):
        parse_config('[daemon]\nmetrics_listen = "here:port"\n[[device]]\nuri = "sim:t4"\n', "x")


def test_a_daemon_configured_with_all_serves_every_gpu_of_the_node(fake_nvml):
    import tempfile

    from governor.devices.daemon.client import request
    from governor.runtime.daemon.config import parse_config
    from governor.runtime.daemon.server import DaemonServer

    sockdir = Path(tempfile.mkdtemp(prefix="gva-"))
    cfg = parse_config(
        f'[daemon]\nsocket = "{sockdir}/g.sock"\n[policy]\npolicy = "none"\n'
        '[[device]]\nuri = "all"\n',
        "site.toml",
    )
    server = DaemonServer(cfg).start_in_thread()
    try:
        status = request("status", socket_path=sockdir / "g.sock")
    finally:
        server.stop()
    assert [d["uri"] for d in status["devices"]] == ["nvml:0", "nvml:1"]
