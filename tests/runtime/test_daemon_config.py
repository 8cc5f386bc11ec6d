"""The daemon's config file and wire protocol: what is accepted, and one-line errors for the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governor.devices.daemon.protocol import ProtocolError, decode_request, encode
from governor.errors import DevicePermissionError
from governor.runtime.daemon.config import ConfigError, check_may_start, load_config, parse_config

REPO = Path(__file__).resolve().parents[2]
GOOD = """
[daemon]
socket = "/run/governor/governor.sock"
socket_group = "governor"
allow = ["status", "apply"]
allow_policies = ["ppw"]

[policy]
policy = "power-cap"
cap_w = 200

[[device]]
uri = "nvml:0"
min_mhz = 600
max_mhz = 1410

[[device]]
uri = "nvml:1"
[device.policy]
policy = "ppw"
"""


def test_a_full_config_is_read_with_site_and_device_policies():
    cfg = parse_config(GOOD, "site.toml")
    assert cfg.socket == Path("/run/governor/governor.sock")
    assert cfg.socket_group == "governor" and cfg.socket_mode == 0o660
    assert cfg.allow == ("status", "apply") and cfg.allow_policies == ("ppw",)
    first, second = cfg.devices
    assert (first.uri, first.min_mhz, first.max_mhz) == ("nvml:0", 600.0, 1410.0)
    assert first.policy == {"policy": "power-cap", "cap_w": 200.0}
    assert second.policy == {"policy": "ppw"}


def test_connection_limits_have_defaults_and_the_old_names_still_work():
    cfg = parse_config("[[device]]\nuri = 'sim:t4'", "c.toml")
    assert (cfg.max_connections, cfg.request_timeout_s, cfg.idle_timeout_s, cfg.workers) == (
        256,
        2.0,
        10.0,
        4,
    )
    old = parse_config(
        "[daemon]\nmax_clients = 16\nclient_timeout_s = 5.0\n[[device]]\nuri = 'sim:t4'", "c.toml"
    )
    assert (old.max_connections, old.idle_timeout_s) == (16, 5.0)
    assert old.to_dict()["max_connections"] == 16


def test_the_shipped_example_config_is_valid():
    cfg = load_config(REPO / "deploy" / "governor-daemon.toml")
    assert cfg.devices and cfg.socket == Path("/run/governor/governor.sock")


@pytest.mark.parametrize(
    "text, key",
    [
        ("[daemon]\nsockt = '/x'\n[[device]]\nuri='sim:t4'", "daemon.sockt"),
        ("[daemon]\nsocket = 'relative.sock'\n[[device]]\nuri='sim:t4'", "daemon.socket"),
        ("[daemon]\nallow = ['status', 'shell']\n[[device]]\nuri='sim:t4'", "daemon.allow"),
        (
            "[daemon]\nallow_policies = ['battery']\n[[device]]\nuri='sim:t4'",
            "daemon.allow_policies",
        ),
        ("[daemon]\nsocket_mode = '0666'\n[[device]]\nuri='sim:t4'", "daemon.socket_mode"),
        ("[daemon]\nmax_request_bytes = 10\n[[device]]\nuri='sim:t4'", "daemon.max_request_bytes"),
        ("[daemon]\ntest_mode = true\n[[device]]\nuri='sim:t4'", "daemon.test_mode"),
        ("[daemon]\nmax_connections = 0\n[[device]]\nuri='sim:t4'", "daemon.max_connections"),
        ("[daemon]\nmax_connections = 1.5\n[[device]]\nuri='sim:t4'", "daemon.max_connections"),
        ("[daemon]\nmax_clients = 99999\n[[device]]\nuri='sim:t4'", "daemon.max_clients"),
        ("[daemon]\nrequest_timeout_s = 0\n[[device]]\nuri='sim:t4'", "daemon.request_timeout_s"),
        ("[daemon]\nrequest_timeout_s = 61\n[[device]]\nuri='sim:t4'", "daemon.request_timeout_s"),
        ("[daemon]\nidle_timeout_s = 'long'\n[[device]]\nuri='sim:t4'", "daemon.idle_timeout_s"),
        ("[daemon]\nworkers = 0\n[[device]]\nuri='sim:t4'", "daemon.workers"),
        ("[daemon]\nworkers = true\n[[device]]\nuri='sim:t4'", "daemon.workers"),
        (
            "[daemon]\nmax_clients = 8\nmax_connections = 8\n[[device]]\nuri='sim:t4'",
            "daemon.max_clients",
        ),
        ("[daemon]\n", "device"),
        ("[[device]]\nmin_mhz = 100", "device[0].uri"),
        ("[[device]]\nuri = 'sim:t4'\nmin_mhz = -5", "device[0].min_mhz"),
        ("[[device]]\nuri = 'sim:t4'\nmin_mhz = 'fast'", "device[0].min_mhz"),
        ("[[device]]\nuri = 'sim:t4'\nmin_mhz = 900\nmax_mhz = 600", "device[0].min_mhz"),
        ("[[device]]\nuri = 'sim:t4'\n[[device]]\nuri = 'sim:t4'", "device[1].uri"),
        ("[[device]]\nuri = 'auto'", "device[0].uri"),
        ("[policy]\npolicy = 'turbo'\n[[device]]\nuri = 'sim:t4'", "policy.policy"),
        ("[policy]\npolicy = 'power-cap'\n[[device]]\nuri = 'sim:t4'", "policy.cap_w"),
        (
            "[policy]\npolicy = 'battery'\nbattery_wh = 50\n[[device]]\nuri = 'sim:t4'",
            "policy.hours",
        ),
        (
            "[[device]]\nuri = 'sim:t4'\npolicy = { policy = 'throughput' }",
            "device[0].policy.rate_hz",
        ),
        ("[[device]]\nuri = 'sim:t4'\ncolour = 'red'", "device[0].colour"),
        ("[deamon]\n[[device]]\nuri = 'sim:t4'", "deamon"),
        ("this is = = not toml", "invalid TOML"),
    ],
)
def test_invalid_configs_get_one_line_naming_file_and_key(text, key):
    with pytest.raises(ConfigError) as err:
        parse_config(text, "site.toml")
    message = str(err.value)
    assert message.startswith("site.toml: ") and key in message
    assert "\n" not in message


def test_an_unreadable_config_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="missing.toml: cannot read"):
        load_config(tmp_path / "missing.toml")


def test_refuses_to_start_without_root_unless_test_mode_under_temp(tmp_path):
    cfg = parse_config("[[device]]\nuri = 'sim:t4'", "c.toml")
    check_may_start(cfg, euid=0)
    with pytest.raises(DevicePermissionError, match="must run as root"):
        check_may_start(cfg, euid=1000)
    with pytest.raises(ConfigError, match="temporary"):  # test mode, but /run/governor
        check_may_start(cfg, euid=1000, test_mode=True)
    in_temp = parse_config(
        f"[daemon]\nsocket = '{tmp_path}/d.sock'\n[[device]]\nuri = 'sim:t4'", "c.toml"
    )
    check_may_start(in_temp, euid=1000, test_mode=True)


# -- protocol -----------------------------------------------------------------------------------
def test_valid_requests_decode():
    req = decode_request(
        b'{"action": "lock", "min_mhz": 900, "max_mhz": 1200.5, "device": "nvml:0", "id": 7}\n'
    )
    assert (req.action, req.min_mhz, req.max_mhz, req.device, req.id) == (
        "lock",
        900.0,
        1200.5,
        "nvml:0",
        7,
    )
    assert decode_request(b'{"action": "apply", "policy": "ppw"}').policy == "ppw"
    assert decode_request(b'{"action": "status"}').device is None


@pytest.mark.parametrize(
    "line, code",
    [
        (b"{not json", "bad-json"),
        (b"\xff\xfe", "bad-json"),
        (b"[1, 2]", "bad-json"),
        (b'{"action": "lock", "min_mhz": NaN}', "bad-json"),
        (b'{"action": "lock", "min_mhz": Infinity}', "bad-json"),
        (b"{}", "bad-request"),
        (b'{"action": 5}', "bad-request"),
        (b'{"action": "format_disk"}', "unknown-action"),
        (b'{"action": "status", "command": "rm -rf /"}', "bad-request"),
        (b'{"action": "lock"}', "bad-request"),
        (b'{"action": "lock", "min_mhz": "900"}', "bad-request"),
        (b'{"action": "lock", "min_mhz": true}', "bad-request"),
        (b'{"action": "lock", "min_mhz": -1}', "bad-request"),
        (b'{"action": "lock", "min_mhz": 1e308}', "bad-request"),
        (b'{"action": "lock", "min_mhz": 1200, "max_mhz": 900}', "bad-request"),
        (b'{"action": "apply"}', "bad-request"),
        (b'{"action": "apply", "policy": 3}', "bad-request"),
        (b'{"action": "apply", "policy": "ppw", "device": "x\\u0000y"}', "bad-request"),
        (b'{"action": "status", "device": ""}', "bad-request"),
        (b'{"action": "status", "id": [1]}', "bad-request"),
        (b'{"action": "status", "id": true}', "bad-request"),
        (b'{"action": "status", "pad": "' + b"x" * 5000 + b'"}', "too-large"),
    ],
)
def test_malformed_requests_are_refused_with_a_code(line, code):
    with pytest.raises(ProtocolError) as err:
        decode_request(line, 4096)
    assert err.value.code == code
    assert "\n" not in str(err.value)


def test_replies_are_one_line_and_json_safe():
    line = encode({"ok": True, "result": {"x": float("nan"), "t": (1, 2)}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"ok": True, "result": {"x": None, "t": [1, 2]}}
