"""A governor whose GPU stops answering (the fake NVML library blocks every call on a GPU
while its hang file exists) holds off while it is wedged and governs it again once it answers:
the clock it holds is written to the driver again (read from the fake driver's state file).
A GPU that fell off the bus stays left alone. Deadlines are 0.5 s; every wait on the GPU
coming back is an event with a generous outer bound, never an assertion on elapsed time."""

from __future__ import annotations

import threading

import pytest

import governor.devices.nvml as backend
from governor.runtime.governor import Governor

OUTER_S = 60.0  # a bound for "eventually", never reached unless something is broken
A100_TOP_MHZ = 1410


@pytest.fixture
def nvml(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    monkeypatch.setenv("GOVERNOR_DEVICE_DEADLINES", "read=0.5,write=0.5,open=0.5,close=0.5")
    yield fake_nvml
    fake_nvml.unhang(0)
    for thread in threading.enumerate():  # the calls left behind end once the GPU answers
        if thread.name.startswith("governor-probe") or thread.name.endswith("(abandoned)"):
            thread.join(OUTER_S)


def answered(device) -> threading.Event:
    """Set when ``device`` answers again after it stopped."""
    up = threading.Event()
    device.on_responding(lambda responding, why: responding and up.set())
    return up


def test_a_gpu_that_stopped_answering_is_governed_again_once_it_answers(nvml):
    with backend.open_nvml("0") as a100:
        gov = Governor(
            a100, {"policy": "max"}, profile=False, background=False, handle_signals=False
        )
        gov.start()
        try:
            assert nvml.gpu(0).gpu_locked == (A100_TOP_MHZ, A100_TOP_MHZ)
            up = answered(a100)
            nvml.hang(0)
            gov.update()  # its reading misses the deadline: held off, said once
            assert gov.lost is not None and "not responding" in gov.lost
            gov.update()  # still wedged: nothing more is tried or said
            assert sum("stopped changing it" in n for n in gov.status()["notes"]) == 1
            nvml.drop_locks(0)  # a GPU reset while the governor cannot reach it
            writes = nvml.gpu(0).writes
            nvml.unhang(0)
            assert up.wait(OUTER_S), "the GPU answers again but the device does not say so"
            gov.update()
            assert gov.lost is None
            assert nvml.gpu(0).gpu_locked == (A100_TOP_MHZ, A100_TOP_MHZ)
            assert nvml.gpu(0).writes > writes
            notes = gov.status()["notes"]
            assert sum("nvml:0 answers again; governor governs it again" in n for n in notes) == 1
        finally:
            gov.stop()
        assert nvml.gpu(0).gpu_locked is None  # restored at the end as usual


def test_a_gpu_off_the_bus_stays_left_alone_when_it_comes_back(nvml):
    with backend.open_nvml("0") as a100:
        gov = Governor(
            a100, {"policy": "max"}, profile=False, background=False, handle_signals=False
        )
        gov.start()
        try:
            nvml.faults(lost=[0])
            gov.update()
            assert gov.lost is not None and "lost" in gov.lost
            nvml.drop_locks(0)  # a GPU reset while the governor cannot reach it
            nvml.faults()  # back on the bus: a lost GPU needs a reset first, so hands off
            gov.update()
            assert gov.lost is not None
            assert nvml.gpu(0).gpu_locked is None
        finally:
            gov.stop()
