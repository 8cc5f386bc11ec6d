"""CUDA calibration loads: sizing, error paths, and the launch loop over a fake CuPy."""

from __future__ import annotations

import time
import types

import pytest

from governor.calibrate import cuda_loads
from governor.calibrate.loads import make_load
from governor.devices.base import Capabilities, Device, Identity
from governor.errors import CalibrationError, InvalidRequestError, UnsupportedError


class _Dev(Device):
    def __init__(self, uri="nvml:0", kind="nvml"):
        super().__init__(Identity(uri=uri, kind=kind, name="GPU", model="a100-sxm"), Capabilities())


def test_grid_fills_every_sm_a_few_times():
    assert cuda_loads.compute_grid(108, 2048) == 108 * 8 * 4  # A100: 8 blocks of 256 per SM
    assert cuda_loads.compute_grid(1, 2048) == 32  # Nano: one SM
    assert cuda_loads.compute_grid(40, 1024, block_threads=256, waves=1) == 160  # T4
    with pytest.raises(InvalidRequestError):
        cuda_loads.compute_grid(0, 2048)
    with pytest.raises(InvalidRequestError):
        cuda_loads.compute_grid(8, 128, block_threads=256)


def test_memory_buffers_beat_the_cache_and_fit_free_memory():
    n = cuda_loads.memory_elements(80 << 30, 40 << 20)
    assert n * 4 == 1 << 30  # capped at 1 GiB per buffer
    n = cuda_loads.memory_elements(2 << 30, 4 << 20)
    assert n * 4 == (2 << 30) // 8 and n * 4 >= 16 * (4 << 20)
    with pytest.raises(UnsupportedError, match="MiB"):
        cuda_loads.memory_elements(100 << 20, 40 << 20)


def test_missing_cupy_is_a_clear_unsupported_error(monkeypatch):
    def missing():
        raise ImportError("No module named 'cupy'")

    monkeypatch.setattr(cuda_loads, "_import_cupy", missing)
    with pytest.raises(UnsupportedError, match=r"governor\[cuda\]"):
        make_load(_Dev(), "builtin")


def _fake_cupy(devices=1, fail_after=None):
    cp = types.ModuleType("fake_cupy")
    cp.float32 = "float32"
    cp.int32 = int
    launches = []
    cp.launches = launches

    class _Runtime:
        @staticmethod
        def getDeviceCount():
            if devices is None:
                raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
            return devices

        @staticmethod
        def memGetInfo():
            return (16 << 30, 40 << 30)

    class _Ctx:
        def __init__(self, *a, **k):
            self.attributes = {
                "MultiProcessorCount": 108,
                "MaxThreadsPerMultiProcessor": 2048,
                "L2CacheSize": 40 << 20,
            }

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def synchronize(self):
            time.sleep(0.001)

    def kernel(source, name):
        assert "fmaf" in source and name in source

        def launch(grid, block, args):
            if fail_after is not None and len(launches) >= fail_after:
                raise RuntimeError("cudaErrorLaunchFailure")
            launches.append((grid, block, args[1]))

        return launch

    cp.cuda = types.SimpleNamespace(runtime=_Runtime, Device=_Ctx, Stream=_Ctx)
    cp.RawKernel = kernel
    cp.empty = lambda n, dtype: ("buf", n)
    cp.ones = lambda n, dtype: ("src", n)
    cp.empty_like = lambda a: ("dst", a[1])
    cp.copyto = lambda dst, src: launches.append(("copy", dst[1]))
    return cp


def test_compute_load_launches_a_full_grid_until_stopped(monkeypatch):
    cp = _fake_cupy()
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: cp)
    load = make_load(_Dev(), "builtin")
    assert load.kind == "builtin" and load.blocks == 108 * 8 * 4
    with load:
        deadline = time.monotonic() + 5
        while load.work_done() < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
    done = load.work_done()
    assert done >= 3 and done == len(cp.launches)
    assert cp.launches[0] == ((3456,), (256,), cuda_loads.FMA_ITERATIONS)


def test_memory_load_copies_and_errors_surface(monkeypatch):
    cp = _fake_cupy()
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: cp)
    load = make_load(_Dev(uri="jetson", kind="jetson"), "memory")
    assert load.kind == "memory" and load.elements * 4 == 1 << 30  # 16 GiB free: capped at 1 GiB
    with load:
        time.sleep(0.02)
    assert load.work_done() >= 1 and cp.launches[0] == ("copy", load.elements)
    broken = _fake_cupy(fail_after=2)
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: broken)
    load = make_load(_Dev(), "builtin")
    with load:
        time.sleep(0.05)
    with pytest.raises(CalibrationError, match="cudaErrorLaunchFailure"):
        load.work_done()


def test_no_gpu_or_wrong_index(monkeypatch):
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: _fake_cupy(devices=None))
    with pytest.raises(UnsupportedError, match="no CUDA GPU"):
        make_load(_Dev(), "builtin")
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: _fake_cupy(devices=1))
    with pytest.raises(UnsupportedError, match="1 CUDA GPU"):
        make_load(_Dev(uri="nvml:3"), "builtin")
