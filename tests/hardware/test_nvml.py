"""The NVML backend against a fake pynvml that raises the real NVMLError classes."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pynvml
import pytest
from hw_fake_nvml import STUB_ARITY, FakeGpu, make_fake_nvml

import governor
from governor.devices import nvml as backend
from governor.errors import (
    DeviceNotFoundError,
    DevicePermissionError,
    InvalidRequestError,
    UnsupportedError,
)


@pytest.fixture
def fake(monkeypatch):
    """Install a fake pynvml with the GPUs given; returns the module."""

    def install(*gpus, **kwargs):
        nv = make_fake_nvml(list(gpus) or [FakeGpu()], **kwargs)
        monkeypatch.setattr(backend, "_import_pynvml", lambda: nv)
        monkeypatch.setattr(backend, "_is_root", lambda: True)
        return nv

    return install


# -- the fake cannot drift from nvidia-ml-py -----------------------------------------------
def _positional_count(fn) -> int:
    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def test_every_stub_exists_in_pynvml_with_the_same_parameter_count():
    nv = make_fake_nvml([FakeGpu()])
    stubs = {
        n
        for n, v in vars(nv).items()
        if n.startswith("nvml") and inspect.isfunction(v) and v is not getattr(pynvml, n, None)
    }
    assert stubs == set(STUB_ARITY), "STUB_ARITY must list exactly the stubbed functions"
    for name in sorted(stubs):
        real = getattr(pynvml, name, None)
        assert real is not None, f"pynvml has no {name}"
        fake_fn = getattr(nv, name)
        has_varargs = any(
            p.kind == p.VAR_POSITIONAL for p in inspect.signature(fake_fn).parameters.values()
        )
        fake_count = STUB_ARITY[name] if has_varargs else _positional_count(fake_fn)
        assert fake_count == STUB_ARITY[name], name
        assert _positional_count(real) == fake_count, (
            f"{name}: pynvml takes {inspect.signature(real)}"
        )


def test_the_backend_calls_only_functions_the_fake_stubs():
    source = Path(backend.__file__).read_text(encoding="utf-8")
    called = set(re.findall(r"\bnv\.(nvml\w+)", source)) | set(
        re.findall(r'"(nvmlDevice\w+)"', source)
    )
    called = {c for c in called if not c.startswith("nvmlClocks")}
    nv = make_fake_nvml([FakeGpu()])
    missing = sorted(c for c in called if not inspect.isfunction(getattr(nv, c, None)))
    assert not missing


# -- reading -----------------------------------------------------------------------------------
def test_open_reads_converted_units_and_throttle_names(fake):
    fake(FakeGpu())
    with governor.open_device("nvml:0") as dev:
        caps = dev.capabilities
        assert caps.power and caps.energy_counter and caps.lock_gpu_clocks and caps.power_limit
        assert not caps.lock_mem_clock  # one memory clock only
        assert dev.identity.model == "a100-sxm"
        assert dev.identity.uuid.startswith("GPU-")
        s = dev.sample()
        assert s.power_w == pytest.approx(71.0)  # the instant field, mW -> W
        assert dev.power_source == "instant"
        assert s.power_scope == "gpu"
        assert s.energy_j == pytest.approx(123456.789)
        assert (s.gpu_clock_mhz, s.mem_clock_mhz, s.temperature_c, s.utilisation_pct) == (
            1410,
            1593,
            33,
            5,
        )
        assert s.throttle_reasons == {"idle", "sw_power_cap"}
        clocks = dev.supported_clocks_mhz()
        assert clocks[0] == 210 and clocks[-1] == 1410 and len(clocks) == 81
        assert dev.power_limit_range().min_w == 100 and dev.power_limit_range().max_w == 400
        assert dev.control_reason() is None


def test_power_falls_back_to_power_usage_without_the_field(fake):
    fake(FakeGpu(instant_mw=None))
    with governor.open_device("nvml:0") as dev:
        assert dev.power_source == "usage"
        assert dev.sample().power_w == pytest.approx(67.0)


def test_jetson_orin_via_nvml_reports_capabilities_false_not_errors(fake):
    orin = FakeGpu(
        name="Orin (nvgpu)",
        unsupported=(
            "nvmlDeviceGetPowerUsage",
            "nvmlDeviceGetFieldValues",
            "nvmlDeviceGetTotalEnergyConsumption",
            "nvmlDeviceGetClockInfo",
            "nvmlDeviceGetSupportedMemoryClocks",
            "nvmlDeviceGetPowerManagementLimitConstraints",
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ),
    )
    nv = fake(orin)
    assert backend.discover_nvml() == []  # left to the jetson backend
    with governor.open_device("nvml:0") as dev:
        caps = dev.capabilities
        assert not (caps.power or caps.gpu_clock or caps.lock_gpu_clocks or caps.power_limit)
        assert caps.temperature
        s = dev.sample()
        assert s.power_w is None and s.gpu_clock_mhz is None and s.temperature_c == 33
        assert "jetson" in dev.control_reason()
        assert not dev.control_permitted()
        with pytest.raises(UnsupportedError):
            dev.lock_gpu_clocks(600)
    assert nv.init_count == 0


# -- control -----------------------------------------------------------------------------------
def test_lock_and_restore_clocks_and_power_limit(fake):
    nv = fake(FakeGpu(mem_clocks=(1593, 810)))
    gpu_state = None
    with governor.open_device("nvml:0") as dev:
        assert dev.supported_mem_clocks_mhz() == (810.0, 1593.0)
        assert dev.lock_gpu_clocks(1000, 1101) == (1005.0, 1095.0)  # snapped to the 15 MHz table
        dev.set_power_limit(250)
        dev.lock_mem_clock(810)
        assert dev.supported_clocks_mhz()[-1] == 990  # the table at 810 MHz memory tops out at 1000
        assert dev.state().power_limit_w == 250
        assert dev.changed
        gpu_state = dev._handle.gpu
        assert gpu_state.locked == (1005, 1095) and gpu_state.limit_mw == 250000
    assert (
        gpu_state.locked is None and gpu_state.mem_locked is None and gpu_state.limit_mw == 400000
    )
    assert ("nvmlDeviceSetPowerManagementLimit", 400000) in nv.calls
    assert nv.init_count == 0


def test_no_permission_becomes_our_error_with_how_to(fake, monkeypatch):
    fake(FakeGpu(no_permission=True))
    monkeypatch.setattr(backend, "_is_root", lambda: False)
    dev = governor.open_device("nvml:0")
    try:
        assert "root" in dev.control_reason()
        with pytest.raises(DevicePermissionError) as info:
            dev.lock_gpu_clocks(1005)
        assert isinstance(info.value.__cause__, pynvml.NVMLError_NoPermission)
        assert isinstance(info.value, PermissionError)
        message = str(info.value)
        assert (
            "sudo" in message
            and "daemon" in message
            and "nvidia-smi --lock-gpu-clocks=1005,1005" in message
        )
        # a refused write changed nothing, so nothing is left in the journal to undo
        assert not dev.changed and dev.restore() == {}
    finally:
        dev.close()


def test_not_supported_write_is_unsupported(fake):
    fake(FakeGpu(mem_clocks=(1593, 810), unsupported=("nvmlDeviceSetMemoryLockedClocks",)))
    with governor.open_device("nvml:0") as dev:
        with pytest.raises(UnsupportedError):
            dev.lock_mem_clock(810)


def test_power_limit_outside_constraints_is_refused_before_nvml(fake):
    nv = fake(FakeGpu())
    with governor.open_device("nvml:0") as dev:
        with pytest.raises(InvalidRequestError):
            dev.set_power_limit(50)
    assert not nv.calls


# -- selection ---------------------------------------------------------------------------------
def test_cuda_visible_devices_maps_indices_and_uuids(fake, monkeypatch):
    a = FakeGpu(name="Tesla T4", uuid="GPU-aaaa1111-0000-0000-0000-000000000000")
    b = FakeGpu(name="NVIDIA L4", uuid="GPU-bbbb2222-0000-0000-0000-000000000000")
    fake(a, b)
    assert backend.discover_nvml() == ["nvml:0", "nvml:1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert backend.discover_nvml() == ["nvml:0"]
    with governor.open_device("nvml:0") as dev:
        assert dev.identity.model == "l4"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb2222,0")
    with governor.open_device("nvml:1") as dev:
        assert dev.identity.model == "t4"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(DeviceNotFoundError, match="CUDA_VISIBLE_DEVICES"):
        governor.open_device("nvml:0")


def test_visible_devices_stops_at_the_first_invalid_entry():
    uuids = ["GPU-aaaa", "GPU-bbbb"]
    assert backend.visible_devices("1,7,0", 2, uuids) == ["1"]
    assert backend.visible_devices("-1", 2, uuids) == []
    assert backend.visible_devices("bbbb,0", 2, uuids) == ["1", "0"]
    assert backend.visible_devices("MIG-123", 2, uuids) == ["MIG-123"]
    assert backend.visible_devices(None, 2, uuids) == ["0", "1"]


def test_mig_instance_reads_its_gpu_and_refuses_control(fake):
    fake(FakeGpu(mig_children=["MIG-c0ffee00-0000-0000-0000-000000000000"]))
    with governor.open_device("nvml:MIG-c0ffee00-0000-0000-0000-000000000000") as dev:
        assert "MIG" in dev.identity.name
        assert dev.identity.uuid.startswith("MIG-")
        assert dev.sample().power_w == pytest.approx(71.0)
        assert not dev.capabilities.lock_gpu_clocks
        assert "MIG" in dev.control_reason()


def test_missing_driver_and_missing_bindings(fake, monkeypatch):
    fake(init_error=pynvml.NVMLError_DriverNotLoaded)
    assert backend.discover_nvml() == []
    with pytest.raises(DeviceNotFoundError, match="driver"):
        governor.open_device("nvml:0")

    def no_module():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(backend, "_import_pynvml", no_module)
    assert backend.discover_nvml() == []
    with pytest.raises(DeviceNotFoundError, match=r"governor\[nvml\]"):
        governor.open_device("nvml:0")
