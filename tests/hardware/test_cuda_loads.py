"""CUDA calibration loads: sizing, error paths, the launch loop over a fake CuPy, and finding
the CUDA device of an NVML GPU (through the fake NVML driver) by UUID and PCI bus id."""

from __future__ import annotations

import time
import types

import pytest
from fakes.nvml import A100, T4

import governor
from governor.calibrate import cuda_loads
from governor.calibrate.loads import make_load
from governor.devices.base import Capabilities, Device, Identity
from governor.errors import CalibrationError, InvalidRequestError, UnsupportedError


class _Dev(Device):
    def __init__(self, uri="nvml:0", kind="nvml", uuid=None, pci_bus_id=None):
        identity = Identity(uri=uri, kind=kind, name="GPU", model="a100-sxm", uuid=uuid)
        super().__init__(identity, Capabilities())
        self.pci_bus_id = pci_bus_id


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


def _fake_cupy(devices=1, fail_after=None, gpus=None):
    """A CuPy over ``devices`` CUDA GPUs, or over ``gpus``: (UUID, CUDA's PCI bus id) each,
    in CUDA's order."""
    if gpus is not None:
        devices = len(gpus)
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

        @staticmethod
        def deviceGetPCIBusId(index):
            if gpus is None or not 0 <= index < len(gpus):
                raise RuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
            return gpus[index][1]

        @staticmethod
        def getDeviceProperties(index):
            if gpus is None or not 0 <= index < len(gpus):
                raise RuntimeError("cudaErrorInvalidDevice: invalid device ordinal")
            # CUDA's uuid is the 16 bytes NVML prints as GPU-xxxxxxxx-xxxx-...
            return {"name": b"GPU", "uuid": bytes.fromhex(gpus[index][0][4:].replace("-", ""))}

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


def test_no_gpu_or_a_gpu_cuda_does_not_see(monkeypatch):
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: _fake_cupy(devices=None))
    with pytest.raises(UnsupportedError, match="no CUDA GPU"):
        make_load(_Dev(), "builtin")
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: _fake_cupy(devices=0))
    with pytest.raises(UnsupportedError, match="no CUDA GPU"):
        make_load(_Dev(), "builtin")
    monkeypatch.setattr(
        cuda_loads, "_import_cupy", lambda: _fake_cupy(gpus=[(T4["uuid"], "0000:3B:00.0")])
    )
    with pytest.raises(UnsupportedError, match="1 CUDA GPU"):
        make_load(_Dev(uuid=A100["uuid"], pci_bus_id=A100["pci"]), "builtin")
    # a device that says neither who nor where it is: only a lone CUDA GPU can be it
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: _fake_cupy(devices=2))
    with pytest.raises(UnsupportedError, match="cannot tell which"):
        make_load(_Dev(uri="jetson", kind="jetson"), "builtin")


# CUDA's default order is fastest first; NVML's is the PCI bus order (A100 07:00, T4 3B:00).
CUDA_ORDER = [(T4["uuid"], "0000:3b:00.0"), (A100["uuid"], "0000:07:00.0")]


def test_the_cuda_device_is_found_by_uuid_not_by_nvml_index(fake_nvml, monkeypatch):
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: _fake_cupy(gpus=CUDA_ORDER))
    with governor.open_device("nvml:0") as a100, governor.open_device("nvml:1") as t4:
        assert make_load(a100, "builtin").cuda_index == 1
        assert make_load(t4, "memory").cuda_index == 0
    with governor.open_device("nvml:3b:00.0") as t4:
        assert make_load(t4, "builtin").cuda_index == 0


def test_the_pci_bus_id_finds_it_when_cuda_reports_no_uuid(fake_nvml, monkeypatch):
    cp = _fake_cupy(gpus=CUDA_ORDER)
    cp.cuda.runtime.getDeviceProperties = staticmethod(lambda index: {"name": b"GPU"})
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: cp)
    with governor.open_device(f"nvml:{A100['uuid']}") as a100:
        assert make_load(a100, "builtin").cuda_index == 1


def test_cuda_visible_devices_hides_gpus_from_cuda_not_from_nvml(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", T4["uuid"])
    monkeypatch.setattr(cuda_loads, "_import_cupy", lambda: _fake_cupy(gpus=CUDA_ORDER[:1]))
    with governor.open_device("nvml:1") as t4:
        assert make_load(t4, "builtin").cuda_index == 0
    with governor.open_device("nvml:0") as a100:
        with pytest.raises(UnsupportedError, match="CUDA_VISIBLE_DEVICES=GPU-7e54"):
            make_load(a100, "builtin")
