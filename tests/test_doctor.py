"""governor doctor: what it found, what is missing, and the exact fix, on a machine without a
GPU and on a fake AGX Orin tree."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from cli_helpers import run_cli

sys.path.insert(0, str(Path(__file__).parent / "hardware"))
from hw_trees import build_agx_orin, install_tools  # noqa: E402


def _checks(capsys):
    code, out, err = run_cli(capsys, "doctor", "--json")
    assert code == 0, err
    return {row["check"]: row for row in json.loads(out)["checks"]}


def test_without_a_gpu_it_says_simulation_and_how_to_fix(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(tmp_path / "empty"))
    monkeypatch.setattr("governor.devices.registry.discover_hardware", lambda: [])
    rows = _checks(capsys)
    assert rows["devices"]["status"] == "missing"
    assert "sim:agx-orin" in rows["devices"]["found"]
    assert rows["python"]["status"] == "ok"
    if rows["cupy"]["status"] == "missing":
        assert rows["cupy"]["fix"] == "pip install 'gpu-governor[cuda]'"


def test_on_a_jetson_it_lists_the_board_tools_and_missing_profile(capsys, monkeypatch, tmp_path):
    root = tmp_path / "root"
    info = build_agx_orin(root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    bin_dir = install_tools(tmp_path / "bin", node=info["node"])
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '')}")
    rows = _checks(capsys)
    assert rows["jetson"]["status"] == "ok" and "17000000.gpu" in rows["jetson"]["found"]
    assert rows["nvpmodel"]["status"] == "ok" and rows["tegrastats"]["status"] == "missing"
    assert rows["profile"]["status"] == "missing"
    assert rows["profile"]["fix"] == "governor calibrate --device jetson"


def test_unrestored_journals_are_reported(capsys, monkeypatch, tmp_path):
    root = tmp_path / "root"
    build_agx_orin(root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    code, _, err = run_cli(capsys, "apply", "--device", "jetson", "--clock", "510")
    assert code == 0, err
    rows = _checks(capsys)
    assert rows["journals"]["status"] == "problem" and "jetson" in rows["journals"]["found"]
    assert rows["journals"]["fix"].startswith("governor reset --all")
    assert run_cli(capsys, "reset", "--all")[0] == 0


def test_every_optional_extra_has_a_row_with_its_install_line(capsys, monkeypatch):
    import importlib

    for module in ("prometheus_client", "mcap", "rclpy", "jtop", "cupy", "matplotlib"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
        with pytest.raises(ImportError):
            importlib.import_module(module)
    rows = _checks(capsys)
    expected = {
        "prometheus_client": "pip install 'gpu-governor[metrics]'",
        "mcap": "pip install 'gpu-governor[mcap]'",
        "jtop": "pip install 'gpu-governor[jetson]' (the jtop service itself: "
        "sudo pip3 install -U jetson-stats)",
        "cupy": "pip install 'gpu-governor[cuda]'",
        "matplotlib": "pip install 'gpu-governor[plot]'",
    }
    for module, fix in expected.items():
        assert rows[module]["status"] == "missing" and rows[module]["fix"] == fix
    assert rows["rclpy"]["fix"].startswith("pip install 'gpu-governor[ros2]'")
    assert "exporter" in rows["prometheus_client"]["found"]


def test_an_installed_extra_is_ok_with_its_version(capsys):
    pytest.importorskip("prometheus_client")
    rows = _checks(capsys)
    assert rows["prometheus_client"]["status"] == "ok"
    assert rows["prometheus_client"]["fix"] is None
    assert rows["prometheus_client"]["found"].startswith("prometheus_client ")


def test_nvrtc_has_a_row_missing_with_its_install_line_or_ok(capsys, monkeypatch):
    """The kernels' compile check needs NVRTC: doctor says whether it is there (issue 49)."""
    rows = _checks(capsys)
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        assert rows["nvrtc"]["status"] == "missing"
    else:
        assert rows["nvrtc"]["status"] == "ok" and rows["nvrtc"]["found"].startswith("NVRTC ")
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
    rows = _checks(capsys)
    assert rows["nvrtc"]["status"] == "missing"
    assert rows["nvrtc"]["fix"] == "pip install 'gpu-governor[nvrtc]' (Python 3.9 or newer)"
