"""Another program (``jetson_clocks``, ``nvpmodel``) changes the devfreq files under a running
governor, on the file tree of an AGX Orin: the governor notices, says so once, steps back
(stops changing the clock) and leaves that program's setting in place at the end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))
from hw_trees import build_agx_orin  # noqa: E402

import governor  # noqa: E402
from governor.paths import state_dir  # noqa: E402
from governor.runtime import Governor  # noqa: E402


@pytest.fixture
def orin(tmp_path, monkeypatch):
    root = tmp_path / "root"
    info = build_agx_orin(root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvpmodel/jetson_clocks of the test's own
    node = root / info["node"].lstrip("/")
    return node


def files(node):
    return tuple((node / name).read_text().strip() for name in ("min_freq", "max_freq"))


def test_an_external_writer_makes_the_governor_step_back_once(orin):
    original = files(orin)
    dev = governor.open_device("jetson")
    gov = Governor(dev, {"policy": "clock", "clock_mhz": 408}, background=False, interval_s=0.01)
    try:
        gov.start()
        gov.step(0.01)
        assert files(orin) == ("408000000", "408000000")
        # jetson_clocks pins the GPU at the top of the power mode's range
        (orin / "max_freq").write_text("612000000\n")
        (orin / "min_freq").write_text("612000000\n")
        for _ in range(3):
            status = gov.step(0.01)
        assert status["overridden_by_other"] == "612-612 MHz"
        said = [n for n in gov.notes if "another program set the GPU clock" in n]
        assert len(said) == 1 and "steps back" in said[0]
        assert files(orin) == ("612000000", "612000000")  # not fought over
        assert status["clock_changes"] == 1
    finally:
        gov.stop()
        dev.close()
    assert files(orin) == ("612000000", "612000000") != original  # left as the other set it
    assert not list(state_dir().glob("journal-*.json"))  # nothing left for reset to undo
