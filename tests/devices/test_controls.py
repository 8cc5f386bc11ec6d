"""Clock locking, power limits and power modes go through one place that journals first."""

from __future__ import annotations

from pathlib import Path

import pytest

import governor
from governor.devices.sim.catalog import get_board
from governor.devices.sim.device import SimDevice
from governor.errors import GovernorError, InvalidRequestError, UnsupportedError


def test_unsupported_clock_is_snapped_to_the_nearest_and_says_so(caplog):
    with governor.open_device("sim:agx-orin") as dev:
        with caplog.at_level("INFO", logger="governor.devices"):
            assert dev.lock_gpu_clocks(1000) == (1020.0, 1020.0)
        assert "1000 MHz snapped to 1020 MHz" in caplog.text
        assert dev.lock_gpu_clocks(1300.5) == (1300.5, 1300.5)  # Jetson's half-MHz clock exactly
        assert dev.lock_gpu_clocks(400, 900) == (408.0, 918.0)


def test_strict_locking_rejects_clocks_not_in_the_table():
    with governor.open_device("sim:agx-orin") as dev:
        with pytest.raises(
            InvalidRequestError, match="1000 MHz is not supported.*nearest are 918 and 1020 MHz"
        ):
            dev.lock_gpu_clocks(1000, strict=True)
        assert not dev.changed


@pytest.mark.parametrize("bad", [5000, 100, -1, float("nan"), float("inf"), "fast"])
def test_out_of_range_and_nonsense_clocks_are_rejected_without_change(bad):
    with governor.open_device("sim:a100-pcie") as dev:
        with pytest.raises(InvalidRequestError):
            dev.lock_gpu_clocks(bad)
        assert not dev.changed and dev.state().gpu_clocks_mhz is None


def test_min_above_max_is_rejected():
    with governor.open_device("sim:a100-pcie") as dev:
        with pytest.raises(InvalidRequestError, match="above maximum"):
            dev.lock_gpu_clocks(1200, 600)


def test_locked_clock_holds_under_load_and_restore_returns_to_default():
    with governor.open_device("sim:a100-pcie") as dev:
        dev.run_workload("compute")
        dev.lock_gpu_clocks(900)
        dev.clock.sleep(2)
        assert dev.sample().gpu_clock_mhz == 900
        assert dev.restore() == {"gpu_clocks": None}
        dev.clock.sleep(1)
        assert dev.sample().gpu_clock_mhz == 1410
        assert dev.restore() == {}  # safe to repeat
        assert not dev.changed


def test_journal_keeps_the_first_original_not_governors_own_setting():
    with governor.open_device("sim:a100-pcie") as dev:
        dev.lock_gpu_clocks(600)
        dev.lock_gpu_clocks(900)
        dev.set_power_limit(200)
        dev.set_power_limit(180)
        assert dev.journal.originals() == {"gpu_clocks": None, "power_limit": 250.0}
        dev.restore()
        assert dev.state().power_limit_w == 250.0 and dev.state().gpu_clocks_mhz is None


def test_context_manager_restores_on_exception():
    dev = governor.open_device("sim:titan-x")
    with pytest.raises(RuntimeError):
        with dev:
            dev.lock_gpu_clocks(709)
            dev.lock_mem_clock(810)
            raise RuntimeError("app crashed")
    assert not dev.changed
    assert dev.state().gpu_clocks_mhz is None and dev.state().mem_clock_mhz is None


def test_power_limit_is_validated_against_its_range():
    with governor.open_device("sim:t4") as dev:
        limits = dev.power_limit_range()
        assert (limits.min_w, limits.max_w, limits.default_w) == (60.0, 70.0, 70.0)
        with pytest.raises(InvalidRequestError, match="outside 60-70 W"):
            dev.set_power_limit(40)
        assert dev.set_power_limit(65) == 65


def test_jetson_power_modes_cap_the_clock_table_and_restore():
    with governor.open_device("sim:agx-orin") as dev:
        assert dev.power_modes() == ("MAXN", "MODE_50W", "MODE_30W", "MODE_15W")
        dev.set_power_mode("MODE_30W")
        assert dev.supported_clocks_mhz()[-1] == 612.0
        dev.run_workload("compute")
        dev.clock.sleep(1)
        assert dev.sample().gpu_clock_mhz == 612.0
        with pytest.raises(InvalidRequestError, match="unknown power mode"):
            dev.set_power_mode("TURBO")
        dev.restore()
        assert dev.state().power_mode == "MAXN"


def test_missing_capabilities_are_reported_not_crashed():
    with governor.open_device("sim:agx-orin") as dev:
        assert not dev.capabilities.power_limit
        with pytest.raises(UnsupportedError, match="does not support setting a power limit"):
            dev.set_power_limit(30)
    with governor.open_device("sim:a100-pcie") as dev:
        with pytest.raises(UnsupportedError):
            dev.set_power_mode("MAXN")
        with pytest.raises(UnsupportedError):  # one memory clock: nothing to lock
            dev.lock_mem_clock(1215)


class _RefusingSim(SimDevice):
    def _write_power_limit(self, power_w):
        from governor.errors import DevicePermissionError

        raise DevicePermissionError("needs root")


def test_a_refused_write_leaves_nothing_to_undo():
    dev = _RefusingSim(get_board("t4"))
    from governor.errors import DevicePermissionError

    with pytest.raises(DevicePermissionError):
        dev.set_power_limit(65)
    assert not dev.changed and dev.restore() == {}
    dev.lock_gpu_clocks(900)
    with pytest.raises(DevicePermissionError):
        dev.set_power_limit(65)
    assert dev.journal.originals() == {"gpu_clocks": None}  # the earlier change is still undoable
    dev.restore()


def test_reset_of_a_simulated_board_reports_what_did_not_come_back(monkeypatch):
    from governor.devices.ownership import reset_device

    dev = governor.open_device("sim:a100-pcie")
    dev.lock_gpu_clocks(1005)
    dev.set_power_limit(200)
    original = dev._reset_gpu_clocks

    def refuse():
        raise GovernorError("driver busy")

    monkeypatch.setattr(dev, "_reset_gpu_clocks", refuse)
    report = reset_device(dev)
    assert report["failed"] == {"gpu_clocks": "driver busy"}
    assert report["restored"] == {"power_limit": 250.0}
    assert dev.state().power_limit_w == 250.0 and dev.state().gpu_clocks_mhz is not None
    monkeypatch.setattr(dev, "_reset_gpu_clocks", original)
    assert reset_device(dev)["restored"] == {"gpu_clocks": None}
    assert dev.state().gpu_clocks_mhz is None and not dev.changed


REPLAY_CSV = Path(__file__).resolve().parent.parent / "data" / "replay" / "a100_pcie_fp32_10pt.csv"


@pytest.mark.parametrize("uri", ["sim:agx-orin", f"replay:{REPLAY_CSV}"])
def test_an_opener_refuses_a_journal_argument_it_would_ignore(uri):
    # ownership makes each owner's journal; an opener that took journal= and dropped it
    # let a caller believe its own journal was used
    with pytest.raises(TypeError, match="journal"):
        governor.open_device(uri, journal=object())


class _InterruptedSim(SimDevice):
    """The driver applies the lock, then Ctrl-C arrives before the write returns."""

    def _write_gpu_clocks(self, min_mhz, max_mhz):
        super()._write_gpu_clocks(min_mhz, max_mhz)
        raise KeyboardInterrupt


def test_an_interrupt_after_the_driver_applied_a_write_keeps_it_undoable():
    dev = _InterruptedSim(get_board("a100-pcie"))
    with pytest.raises(KeyboardInterrupt):
        dev.lock_gpu_clocks(900)
    assert dev.state().gpu_clocks_mhz == (900.0, 900.0)  # the driver did change
    assert dev.journal.originals() == {"gpu_clocks": None}  # and the journal knows
    assert dev.restore() == {"gpu_clocks": None}
    assert dev.state().gpu_clocks_mhz is None  # back to the driver's default
