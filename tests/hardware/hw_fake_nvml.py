"""A fake pynvml: the functions the NVML backend calls, over an in-memory GPU table.

Errors are the real ``pynvml.NVMLError_*`` classes, and ``test_nvml.py`` checks that every
function stubbed here exists in the installed nvidia-ml-py with the same parameter count.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import pynvml

# names re-exported unchanged from the real module (constants and error classes)
_REAL = [n for n in dir(pynvml) if n.startswith(("NVMLError", "NVML_", "nvmlClocks"))]


@dataclass
class FakeGpu:
    name: str = "NVIDIA A100-SXM4-80GB"
    uuid: str = "GPU-11111111-2222-3333-4444-555555555555"
    serial: str = "1320000000001"
    power_mw: int = 67000
    instant_mw: Optional[int] = 71000  # None: the field-values API lacks the field
    energy_mj: int = 123456789
    graphics_mhz: int = 1410
    mem_mhz: int = 1593
    temperature_c: int = 33
    util_pct: int = 5
    reasons: int = 0x1 | 0x4
    mem_clocks: Tuple[int, ...] = (1593,)
    graphics_clocks: Tuple[int, ...] = tuple(range(1410, 209, -15))
    limit_mw: int = 400000
    constraints_mw: Tuple[int, int] = (100000, 400000)
    default_limit_mw: int = 400000
    unsupported: Tuple[str, ...] = ()  # function names that raise NotSupported
    no_permission: bool = False  # setters raise NoPermission
    mig_children: List[str] = field(default_factory=list)
    locked: Optional[Tuple[int, int]] = None
    mem_locked: Optional[Tuple[int, int]] = None


class _Handle:
    def __init__(self, gpu: FakeGpu, index: int, mig_uuid: Optional[str] = None) -> None:
        self.gpu, self.index, self.mig_uuid = gpu, index, mig_uuid


class _Util:
    def __init__(self, gpu: int, memory: int) -> None:
        self.gpu, self.memory = gpu, memory


def make_fake_nvml(gpus: List[FakeGpu], *, init_error: Optional[type] = None) -> types.ModuleType:
    """A module object that behaves like pynvml over ``gpus``; ``calls`` records setter calls."""
    nv = types.ModuleType("fake_pynvml")
    for name in _REAL:
        setattr(nv, name, getattr(pynvml, name))
    nv.calls = []
    nv.init_count = 0
    handles = [_Handle(g, i) for i, g in enumerate(gpus)]

    def check(handle: _Handle, fn: str) -> FakeGpu:
        if fn in handle.gpu.unsupported:
            raise pynvml.NVMLError_NotSupported()
        return handle.gpu

    def stub(fn):
        setattr(nv, fn.__name__, fn)
        return fn

    @stub
    def nvmlInit():
        if init_error is not None:
            raise init_error()
        nv.init_count += 1

    @stub
    def nvmlShutdown():
        if nv.init_count <= 0:
            raise pynvml.NVMLError_Uninitialized()
        nv.init_count -= 1

    @stub
    def nvmlDeviceGetCount():
        return len(handles)

    @stub
    def nvmlDeviceGetHandleByIndex(index):
        if not 0 <= index < len(handles):
            raise pynvml.NVMLError_InvalidArgument()
        return handles[index]

    @stub
    def nvmlDeviceGetHandleByUUID(uuid):
        for h in handles:
            if h.gpu.uuid == uuid:
                return h
            if uuid in h.gpu.mig_children:
                return _Handle(h.gpu, h.index, uuid)
        raise pynvml.NVMLError_NotFound()

    @stub
    def nvmlDeviceIsMigDeviceHandle(device):
        return device.mig_uuid is not None

    @stub
    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(migDevice):
        return handles[migDevice.index]

    @stub
    def nvmlDeviceGetName(handle):
        return check(handle, "nvmlDeviceGetName").name

    @stub
    def nvmlDeviceGetUUID(handle):
        return handle.mig_uuid or check(handle, "nvmlDeviceGetUUID").uuid

    @stub
    def nvmlDeviceGetSerial(handle):
        return check(handle, "nvmlDeviceGetSerial").serial

    @stub
    def nvmlSystemGetDriverVersion():
        return "550.54.15"

    @stub
    def nvmlDeviceGetPowerUsage(handle):
        return check(handle, "nvmlDeviceGetPowerUsage").power_mw

    @stub
    def nvmlDeviceGetFieldValues(handle, fieldIds):
        gpu = check(handle, "nvmlDeviceGetFieldValues")
        out = pynvml.c_nvmlFieldValue_t * len(fieldIds)
        values = out()
        for i, fid in enumerate(fieldIds):
            values[i].fieldId = fid
            if fid == pynvml.NVML_FI_DEV_POWER_INSTANT and gpu.instant_mw is not None:
                values[i].nvmlReturn = pynvml.NVML_SUCCESS
                values[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                values[i].value.uiVal = gpu.instant_mw
            else:
                values[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    @stub
    def nvmlDeviceGetTotalEnergyConsumption(handle):
        return check(handle, "nvmlDeviceGetTotalEnergyConsumption").energy_mj

    @stub
    def nvmlDeviceGetClockInfo(handle, type):
        gpu = check(handle, "nvmlDeviceGetClockInfo")
        return gpu.mem_mhz if type == pynvml.NVML_CLOCK_MEM else gpu.graphics_mhz

    @stub
    def nvmlDeviceGetTemperature(handle, sensor):
        return check(handle, "nvmlDeviceGetTemperature").temperature_c

    @stub
    def nvmlDeviceGetUtilizationRates(handle):
        return _Util(check(handle, "nvmlDeviceGetUtilizationRates").util_pct, 1)

    @stub
    def nvmlDeviceGetCurrentClocksEventReasons(handle):
        return check(handle, "nvmlDeviceGetCurrentClocksEventReasons").reasons

    @stub
    def nvmlDeviceGetCurrentClocksThrottleReasons(handle):
        return check(handle, "nvmlDeviceGetCurrentClocksThrottleReasons").reasons

    @stub
    def nvmlDeviceGetSupportedMemoryClocks(handle):
        return list(check(handle, "nvmlDeviceGetSupportedMemoryClocks").mem_clocks)

    @stub
    def nvmlDeviceGetSupportedGraphicsClocks(handle, memoryClockMHz):
        gpu = check(handle, "nvmlDeviceGetSupportedGraphicsClocks")
        if memoryClockMHz not in gpu.mem_clocks:
            raise pynvml.NVMLError_InvalidArgument()
        top = max(gpu.graphics_clocks) if memoryClockMHz == max(gpu.mem_clocks) else 1000
        return [c for c in gpu.graphics_clocks if c <= top]

    @stub
    def nvmlDeviceGetPowerManagementLimitConstraints(handle):
        return list(check(handle, "nvmlDeviceGetPowerManagementLimitConstraints").constraints_mw)

    @stub
    def nvmlDeviceGetPowerManagementDefaultLimit(handle):
        return check(handle, "nvmlDeviceGetPowerManagementDefaultLimit").default_limit_mw

    @stub
    def nvmlDeviceGetPowerManagementLimit(handle):
        return check(handle, "nvmlDeviceGetPowerManagementLimit").limit_mw

    def setter(name, apply):
        def fn(handle, *args):
            gpu = check(handle, name)
            if gpu.no_permission:
                raise pynvml.NVMLError_NoPermission()
            nv.calls.append((name,) + args)
            apply(gpu, *args)

        fn.__name__ = name
        setattr(nv, name, fn)

    def _set_locked(g, lo, hi):
        g.locked = (lo, hi)

    def _reset_locked(g):
        g.locked = None

    def _set_mem(g, lo, hi):
        g.mem_locked = (lo, hi)

    def _reset_mem(g):
        g.mem_locked = None

    def _set_limit(g, mw):
        if not g.constraints_mw[0] <= mw <= g.constraints_mw[1]:
            raise pynvml.NVMLError_InvalidArgument()
        g.limit_mw = mw

    setter("nvmlDeviceSetGpuLockedClocks", _set_locked)
    setter("nvmlDeviceResetGpuLockedClocks", _reset_locked)
    setter("nvmlDeviceSetMemoryLockedClocks", _set_mem)
    setter("nvmlDeviceResetMemoryLockedClocks", _reset_mem)
    setter("nvmlDeviceSetPowerManagementLimit", _set_limit)
    return nv


# The parameter count of every stub, for the drift test (setters take *args above).
STUB_ARITY: Dict[str, int] = {
    "nvmlInit": 0,
    "nvmlShutdown": 0,
    "nvmlDeviceGetCount": 0,
    "nvmlDeviceGetHandleByIndex": 1,
    "nvmlDeviceGetHandleByUUID": 1,
    "nvmlDeviceIsMigDeviceHandle": 1,
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle": 1,
    "nvmlDeviceGetName": 1,
    "nvmlDeviceGetUUID": 1,
    "nvmlDeviceGetSerial": 1,
    "nvmlSystemGetDriverVersion": 0,
    "nvmlDeviceGetPowerUsage": 1,
    "nvmlDeviceGetFieldValues": 2,
    "nvmlDeviceGetTotalEnergyConsumption": 1,
    "nvmlDeviceGetClockInfo": 2,
    "nvmlDeviceGetTemperature": 2,
    "nvmlDeviceGetUtilizationRates": 1,
    "nvmlDeviceGetCurrentClocksEventReasons": 1,
    "nvmlDeviceGetCurrentClocksThrottleReasons": 1,
    "nvmlDeviceGetSupportedMemoryClocks": 1,
    "nvmlDeviceGetSupportedGraphicsClocks": 2,
    "nvmlDeviceGetPowerManagementLimitConstraints": 1,
    "nvmlDeviceGetPowerManagementDefaultLimit": 1,
    "nvmlDeviceGetPowerManagementLimit": 1,
    "nvmlDeviceSetGpuLockedClocks": 3,
    "nvmlDeviceResetGpuLockedClocks": 1,
    "nvmlDeviceSetMemoryLockedClocks": 3,
    "nvmlDeviceResetMemoryLockedClocks": 1,
    "nvmlDeviceSetPowerManagementLimit": 2,
}
