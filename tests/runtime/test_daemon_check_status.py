"""``governor daemon --check`` opens what the config names (not only parses it), and
``governor daemon status`` says whose clock limits are whose under a site policy."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_cli
from daemon_helpers import ask, config_text, short_socket_dir

pytest.importorskip("governor.runtime.governor")

from governor.runtime.daemon.config import parse_config  # noqa: E402
from governor.runtime.daemon.server import DaemonServer  # noqa: E402


@pytest.fixture
def sockdir():
    path = short_socket_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(
    "device, text",
    [
        (
            'uri = "sim:a100pcie"',
            "daemon.toml: device[0].uri: cannot open sim:a100pcie: unknown simulated board "
            "'a100pcie'; did you mean a100-pcie? known boards: a100-pcie,",
        ),
        (
            'uri = "sim:a100-pcie"\nmin_mhz = 3000.0\nmax_mhz = 4000.0',
            "daemon.toml: device[0]: sim:a100-pcie supports no clock within min_mhz..max_mhz "
            "3000-4000 MHz (its clocks: 210-1410 MHz)",
        ),
    ],
)
def test_check_opens_the_devices_and_refuses_one_that_cannot_serve(
    capsys, monkeypatch, sockdir, device, text
) -> None:
    config = sockdir / "daemon.toml"
    config.write_text(config_text(sockdir / "gd.sock", [device]))
    monkeypatch.chdir(sockdir)  # the message names the file as given
    code, out, err = run_cli(capsys, "daemon", "--config", "daemon.toml", "--check")
    assert (code, out) == (1, "")
    assert err.startswith(f"governor: error: {text}")
    assert err.count("\n") == 1 and "valid" not in err
    assert not (sockdir / "gd.sock").exists()


def test_check_of_a_good_config_opens_read_only_and_says_valid(capsys, sockdir) -> None:
    config = sockdir / "daemon.toml"
    device = 'uri = "sim:a100-pcie"\nmin_mhz = 800.0\nmax_mhz = 1300.0'
    config.write_text(config_text(sockdir / "gd.sock", [device]))
    code, out, err = run_cli(capsys, "daemon", "--config", str(config), "--check", "--json")
    assert code == 0, err
    (opened,) = json.loads(out)["opened"]
    assert opened["uri"] == "sim:a100-pcie" and opened["limits_mhz"] == [800.0, 1300.0]
    assert opened["clocks_mhz"][0] >= 800.0 and opened["clocks_mhz"][-1] <= 1300.0
    state_dir = Path(os.environ["GOVERNOR_STATE_DIR"])
    assert not list(state_dir.rglob("*.json"))  # opening to check takes no lock, no journal
    code, out, err = run_cli(capsys, "daemon", "--config", str(config), "--check")
    assert code == 0 and out.startswith(f"{config}: valid; socket {sockdir / 'gd.sock'}")
    assert "sim:a100-pcie (NVIDIA A100-PCIE-40GB (simulated), clients 800-1300 MHz)" in out


def test_status_says_which_limits_are_the_clients_and_who_set_the_clock(capsys, sockdir) -> None:
    path = sockdir / "governor.sock"
    device = 'uri = "sim:a100-pcie"\nmin_mhz = 800.0\nmax_mhz = 1300.0'
    policy = 'policy = "power-cap"\ncap_w = 150.0'
    cfg = parse_config(config_text(path, [device], "interval_s = 0.05", policy), "gov.toml")
    server = DaemonServer(cfg).start_in_thread()
    try:
        code, out, err = run_cli(capsys, "daemon", "status", "--socket", path)
        assert code == 0, err
        held = ask(path, action="status")["result"]["devices"][0]["state"]["gpu_clocks_mhz"]
        clock = f"{held[0]:g} MHz" if held[0] == held[1] else f"{held[0]:g}-{held[1]:g} MHz"
        line = out.splitlines()[1].strip()
        assert line == (
            f"sim:a100-pcie: GPU clock {clock} (set by the site policy, which the client limits "
            "do not bind); clients may lock 800-1300 MHz; site policy power-cap (cap_w 150)"
        )
        assert ask(path, action="lock", min_mhz=900)["ok"]
        code, out, err = run_cli(capsys, "daemon", "status", "--socket", path)
        assert code == 0, err
        assert out.splitlines()[1].strip() == (
            f"sim:a100-pcie: GPU clock 900 MHz (set by uid {os.getuid()}, a client); "
            "clients may lock 800-1300 MHz; site policy power-cap (cap_w 150)"
        )
    finally:
        server.stop()
