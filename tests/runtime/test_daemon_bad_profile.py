"""A daemon serving a device whose profile is malformed: it starts, logs one line, leaves the
device unchanged, reports the error in status, and refuses 'apply ppw' with an error reply."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from daemon_helpers import ask, config_text, short_socket_dir

from governor.profiles.store import profile_paths
from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.server import DaemonServer

FIELD = "power_model.alpha_w_per_mhz must be a finite number, not 'x'"


@pytest.fixture
def bad_orin_profile(profile_of):
    doc = json.loads(json.dumps(profile_of("agx-orin")))
    doc["power_model"]["alpha_w_per_mhz"] = "x"
    path = profile_paths("agx-orin")[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("policy", ['policy = "ppw"', 'policy = "power-cap"\ncap_w = 20'])
def test_daemon_refuses_the_devices_policy_and_apply_ppw(bad_orin_profile, caplog, policy):
    sockdir = short_socket_dir()
    path = sockdir / "governor.sock"
    cfg = parse_config(config_text(path, ['uri = "sim:agx-orin"'], "", policy), "gov.toml")
    caplog.set_level(logging.INFO, logger="governor.daemon")
    server = DaemonServer(cfg).start_in_thread()
    try:
        status = ask(path, action="status")["result"]["devices"][0]
        assert status["enforcing"] is None and FIELD in status["policy_error"]
        assert str(bad_orin_profile) in status["policy_error"]
        assert status["state"]["gpu_clocks_mhz"] is None and not status["changed"]
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(errors) == 1 and FIELD in errors[0].getMessage()
        assert "\n" not in errors[0].getMessage() and errors[0].exc_info is None

        reply = ask(path, action="apply", policy="ppw")
        assert not reply["ok"] and reply["code"] == "failed"
        assert FIELD in reply["error"] and str(bad_orin_profile) in reply["error"]
        assert not ask(path, action="status")["result"]["devices"][0]["changed"]

        assert ask(path, action="apply", policy="max")["ok"]  # the rest keeps working
        assert ask(path, action="reset")["ok"]
    finally:
        server.stop()
        shutil.rmtree(sockdir, ignore_errors=True)
    assert not server._slots["sim:agx-orin"].device.changed
