"""The daemon enforcing its configured policy through governor.runtime's Governor, on
simulated boards: the policy runs, a client's action pauses it, reset resumes it, and stopping
the daemon restores the board."""

from __future__ import annotations

import shutil

import pytest
from daemon_helpers import ask, config_text, short_socket_dir

pytest.importorskip("governor.runtime.governor")

from governor.runtime.daemon.config import ConfigError, parse_config  # noqa: E402
from governor.runtime.daemon.server import DaemonServer  # noqa: E402


@pytest.fixture
def daemon():
    sockdir = short_socket_dir()
    servers = []

    def _start(policy, device='uri = "sim:a100-pcie"'):
        path = sockdir / "governor.sock"
        cfg = parse_config(config_text(path, [device], "interval_s = 0.05", policy), "gov.toml")
        server = DaemonServer(cfg).start_in_thread()
        servers.append(server)
        return server, path

    yield _start
    for server in servers:
        server.stop()
    shutil.rmtree(sockdir, ignore_errors=True)


def _device(path):
    return ask(path, action="status")["result"]["devices"][0]


def test_power_cap_is_enforced_by_a_governor_and_paused_by_a_client(daemon):
    server, path = daemon('policy = "power-cap"\ncap_w = 150')
    dev = _device(path)
    assert dev["enforcing"]["by"] == "governor" and dev["policy_error"] is None
    assert dev["governor"]["policy"]  # the Governor's own status, passed through
    assert dev["state"]["gpu_clocks_mhz"] is not None  # it holds a clock
    slot = server._slots["sim:a100-pcie"]
    assert slot.governor is not None and slot.governor.running

    assert ask(path, action="lock", min_mhz=900)["ok"]
    dev = _device(path)
    assert dev["enforcing"] is None and "governor" not in dev
    assert dev["state"]["gpu_clocks_mhz"] == [900.0, 900.0]

    reply = ask(path, action="reset")
    assert reply["ok"] and reply["result"]["policy"] == "power-cap"
    assert _device(path)["enforcing"]["by"] == "governor"
    server.stop()
    assert not slot.device.changed


def test_ppw_without_a_profile_runs_on_the_generic_model(daemon):
    server, path = daemon('policy = "ppw"', device='uri = "sim:agx-orin"')
    dev = _device(path)
    assert dev["enforcing"]["by"] == "governor" and dev["policy_error"] is None


def test_the_runtime_judges_policy_specs_in_the_config():
    with pytest.raises(ConfigError, match="gov.toml: policy"):
        parse_config(
            '[policy]\npolicy = "power-cap"\ncap_w = 1e9\n[[device]]\nuri = "sim:t4"', "gov.toml"
        )
