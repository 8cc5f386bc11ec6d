"""A wedged driver (the fake NVML library blocks every call on a GPU while its hang file
exists) under the real nvidia-ml-py: a call past its deadline marks the GPU not responding,
its caller gets one line instead of waiting, the other GPU is served, and the GPU is used
again once it answers. What the driver holds is read from the fake's state file, what is
journaled from the state directory. Deadlines are short (0.5 s) and every wait on the device
coming back is an event with a generous outer bound, never an assertion on elapsed time."""

from __future__ import annotations

import json
import threading

import pytest

import governor.devices.nvml as backend
from governor.devices.deadline import DeviceCalls, deadlines_s
from governor.devices.ownership import RestoreError
from governor.devices.reset import reset_all
from governor.errors import DeviceNotRespondingError, TelemetryError
from governor.paths import state_dir

OUTER_S = 60.0  # a bound for "eventually", never reached unless something is broken


@pytest.fixture
def nvml(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    monkeypatch.setenv("GOVERNOR_DEVICE_DEADLINES", "read=0.5,write=0.5,open=0.5,close=0.5")
    yield fake_nvml
    let_go(fake_nvml)


def let_go(fake):
    """Unwedge every GPU and wait for the calls left behind to finish, so that none of them
    lands in the next test's driver."""
    for index in range(8):
        fake.unhang(index)
    for thread in threading.enumerate():
        if thread.name.startswith(("governor-open", "governor-probe")) or thread.name.endswith(
            "(abandoned)"
        ):
            thread.join(OUTER_S)


def journals():
    directory = state_dir()
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("journal-*.json"))]


def watch(device):
    """Events set when ``device`` stops answering and when it answers again."""
    down, up = threading.Event(), threading.Event()

    def listener(responding, why):
        (up if responding else down).set()

    device.on_responding(listener)
    return down, up


def test_deadlines_come_from_the_environment_and_bad_entries_are_ignored(monkeypatch):
    assert deadlines_s("read=0.25, write=3")["read"] == 0.25
    assert deadlines_s("read=0.25, write=3")["write"] == 3.0
    assert set(deadlines_s("1.5").values()) == {1.5}
    defaults = deadlines_s("")
    assert deadlines_s("read=-1,bogus=2,write=x") == defaults


def test_a_wedged_gpu_fails_its_reads_and_the_other_is_served(nvml):
    with backend.open_nvml("0") as a100, backend.open_nvml("1") as t4:
        down, up = watch(a100)
        assert a100.sample().gpu_clock_mhz is not None
        nvml.hang(0)
        with pytest.raises(
            DeviceNotRespondingError,
            match=r"^nvml:0: not responding: the driver stopped answering \(a read call",
        ):
            a100.sample()
        assert down.is_set() and a100.not_responding is not None
        assert isinstance(DeviceNotRespondingError("x"), TelemetryError)  # callers' except
        # later calls fail at once with the same line, without a worker of their own
        with pytest.raises(DeviceNotRespondingError, match="not responding"):
            a100.state()
        assert t4.sample().gpu_clock_mhz is not None  # the other GPU does not wait
        assert t4.responding
        nvml.unhang(0)
        assert up.wait(OUTER_S), "the GPU answers again but is not served"
        assert a100.responding and a100.sample().gpu_clock_mhz is not None


def test_a_write_past_its_deadline_stays_journaled_and_reset_restores_it(nvml):
    a100 = backend.open_nvml("0")
    down, up = watch(a100)
    a100.lock_gpu_clocks(900)
    assert nvml.gpu(0).gpu_locked == (900, 900)
    nvml.hang(0)
    with pytest.raises(DeviceNotRespondingError):
        a100.lock_gpu_clocks(1005)
    # closing tries the restore with its deadline: the original stays journaled on disk
    with pytest.raises(RestoreError, match="not responding"):
        a100.close()
    assert nvml.gpu(0).gpu_locked == (900, 900)
    (journal,) = journals()
    assert journal["layers"][-1]["original"] == {"gpu_clocks": None}
    # reset of a GPU still wedged says so instead of hanging, and keeps the journal
    (report,) = reset_all()
    assert "not responding" in json.dumps(report["failed"])
    assert len(journals()) == 1
    nvml.unhang(0)
    assert up.wait(OUTER_S)
    (report,) = reset_all()
    assert report["failed"] == {} and report["restored"] == {"gpu_clocks": None}
    assert nvml.gpu(0).gpu_locked is None and journals() == []


def test_opening_a_wedged_gpu_is_one_line(nvml):
    nvml.hang(1)
    with pytest.raises(DeviceNotRespondingError, match=r"^nvml:1: not responding: opening"):
        backend.open_nvml("1")
    with backend.open_nvml("0") as a100:
        assert a100.sample().power_w is not None


def test_discovery_counts_a_wedged_gpu_with_the_lost_ones(nvml):
    nvml.hang(0)
    lost = []
    assert backend.discover_nvml(lost) == ["nvml:1"]
    assert lost == ["nvml:0"]


def test_a_hung_call_that_holds_the_library_lock_blocks_no_caller(nvml):
    """What the stand-in does when a hung call holds NVML's library-wide lock: the other
    GPU's calls in this process block behind it, so they miss their own deadline and that GPU
    is said not responding too; no caller is held, and both come back."""
    with backend.open_nvml("0") as a100, backend.open_nvml("1") as t4:
        ups = [watch(a100)[1], watch(t4)[1]]
        nvml.hang(0, global_lock=True)
        with pytest.raises(DeviceNotRespondingError):
            a100.sample()
        with pytest.raises(DeviceNotRespondingError, match="^nvml:1: not responding"):
            t4.sample()
        nvml.unhang(0)
        assert all(up.wait(OUTER_S) for up in ups)
        assert a100.sample().power_w is not None and t4.sample().power_w is not None


def test_calls_queued_behind_a_stuck_one_fail_with_it():
    release = threading.Event()
    started = threading.Event()
    calls = DeviceCalls("dev", probe=release.wait, deadlines={"read": 0.2})
    answers = []

    def stuck():
        started.set()
        release.wait()
        return "late"

    def caller():
        try:
            answers.append(calls.call("read", lambda: "queued"))
        except DeviceNotRespondingError as err:
            answers.append(str(err))

    with pytest.raises(DeviceNotRespondingError):
        threading.Thread(target=lambda: started.wait() and caller()).start()
        calls.call("read", stuck)
    release.set()
    came_back = threading.Event()
    calls.add_listener(lambda responding, why: responding and came_back.set())
    assert came_back.wait(OUTER_S) or calls.not_responding is None
    assert calls.call("read", lambda: 42) == 42
    assert calls.episodes == 1 and calls.recoveries == 1
    calls.close()


def test_deadlines_are_set_per_device_and_bad_ones_refused(nvml):
    from governor.errors import InvalidRequestError

    with backend.open_nvml("0") as a100:
        a100.set_deadlines_s(read=0.25, write=3)
        assert a100.deadlines_s()["read"] == 0.25 and a100.deadlines_s()["write"] == 3.0
        with pytest.raises(InvalidRequestError, match="unknown kind of call 'sample'"):
            a100.set_deadlines_s(sample=1)
        with pytest.raises(InvalidRequestError, match="above 0"):
            a100.set_deadlines_s(read=0)


def test_wedges_that_come_and_go_leave_no_thread_behind(nvml):
    with backend.open_nvml("0") as a100:
        a100.sample()
        baseline = len(threading.enumerate())
        for _ in range(3):
            down, up = watch(a100)
            nvml.hang(0)
            with pytest.raises(DeviceNotRespondingError):
                a100.sample()
            nvml.unhang(0)
            assert up.wait(OUTER_S)
            let_go(nvml)  # the stuck call and the probe end once the driver answers
            assert a100.sample().power_w is not None
        assert len(threading.enumerate()) == baseline
        assert a100._calls.episodes == 3 and a100._calls.recoveries == 3
