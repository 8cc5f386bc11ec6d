"""The NVML backend over the real nvidia-ml-py and a fake ``libnvidia-ml.so.1`` (tests/fakes/nvml).

What the driver did is read from the fake's state file (``fake_nvml.gpu(i)``), never from the
backend's own idea of it.
"""

from __future__ import annotations

import ctypes
import inspect
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pynvml
import pytest
from fakes.nvml import A100, T4, Gpu

import governor
from governor.devices import nvml as backend
from governor.devices.base import DeviceState
from governor.errors import (
    DeviceNotFoundError,
    DevicePermissionError,
    InvalidRequestError,
    UnsupportedError,
)

ORIN_UNSUPPORTED = (
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetSupportedMemoryClocks",
    "nvmlDeviceGetPowerManagementLimitConstraints",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
MIG_UUID = "MIG-c0ffee00-1111-5222-8333-444444444444"


@pytest.fixture
def nvml(fake_nvml, monkeypatch):
    """The fake driver, with this process counted as root (the fake decides what is refused)."""
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    return fake_nvml


def _balanced():
    """Every nvmlInit of the backend was matched by an nvmlShutdown."""
    if pynvml._nvmlLib_refcount != 0:
        return False
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        pynvml.nvmlShutdown()
    return True


# -- the real binding runs, over the fake --------------------------------------------------------
def test_the_real_nvidia_ml_py_runs_over_the_fake_library(nvml):
    with governor.open_device("nvml:0") as dev:
        assert dev.identity.name == A100["name"]
        module = backend._import_pynvml()
        assert module is pynvml and "site-packages" in Path(module.__file__).parts
        assert module.nvmlLib._handle == nvml.lib._handle  # what CDLL("libnvidia-ml.so.1") got
        assert module.nvmlLib.fakeNvmlIsFake() == 1
    assert _balanced()


def _symbols(name: str, seen=None) -> set:
    """C symbols a pynvml function resolves, following the pynvml functions it calls."""
    seen = set() if seen is None else seen
    if name in seen:
        return set()
    seen.add(name)
    source = inspect.getsource(getattr(pynvml, name))
    found = set(re.findall(r'_nvmlGetFunctionPointer\("(\w+)"\)', source))
    for callee in set(re.findall(r"\b(nvml\w+)\(", source)) - {name}:
        if inspect.isfunction(getattr(pynvml, callee, None)):
            found |= _symbols(callee, seen)
    return found


def test_the_fake_exports_every_symbol_the_backend_reaches_through_pynvml(nvml):
    source = Path(backend.__file__).read_text(encoding="utf-8")
    called = set(re.findall(r"\bnv\.(nvml\w+)\(?", source)) | set(
        re.findall(r'"(nvmlDevice\w+)"', source)
    )
    called = {c for c in called if inspect.isfunction(getattr(pynvml, c, None))}
    assert {"nvmlInit", "nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetPciInfo"} <= called
    wanted = set().union(*(_symbols(c) for c in called))
    assert {"nvmlInitWithFlags", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetPciInfo_v3"} <= (
        wanted
    )
    assert "nvmlDeviceGetHandleByPciBusId_v2" in wanted
    missing = sorted(s for s in wanted if not hasattr(nvml.lib, s))
    assert not missing


def test_the_fake_validates_arguments_like_the_driver(nvml):
    lib = nvml.lib
    handle = ctypes.c_void_p()
    count = ctypes.c_uint()
    assert lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) == pynvml.NVML_ERROR_UNINITIALIZED
    assert lib.nvmlInit_v2() == pynvml.NVML_SUCCESS
    try:
        assert lib.nvmlDeviceGetHandleByIndex_v2(0, None) == pynvml.NVML_ERROR_INVALID_ARGUMENT
        assert lib.nvmlDeviceGetHandleByIndex_v2(2, ctypes.byref(handle)) == (
            pynvml.NVML_ERROR_INVALID_ARGUMENT
        )
        assert lib.nvmlDeviceGetHandleByUUID(b"GPU-nope", ctypes.byref(handle)) == (
            pynvml.NVML_ERROR_NOT_FOUND
        )
        assert lib.nvmlDeviceGetHandleByPciBusId_v2(b"0000:99:00.0", ctypes.byref(handle)) == (
            pynvml.NVML_ERROR_NOT_FOUND
        )
        assert lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) == 0
        assert lib.nvmlDeviceGetPowerUsage(handle, None) == pynvml.NVML_ERROR_INVALID_ARGUMENT
        assert lib.nvmlDeviceGetPowerUsage(ctypes.c_void_p(8), ctypes.byref(count)) == (
            pynvml.NVML_ERROR_INVALID_ARGUMENT
        )
        name = ctypes.create_string_buffer(8)
        assert lib.nvmlDeviceGetName(handle, name, 8) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        for lo, hi in ((1000, 1100), (1100, 1005), (195, 1410), (210, 1425)):
            assert lib.nvmlDeviceSetGpuLockedClocks(handle, lo, hi) == (
                pynvml.NVML_ERROR_INVALID_ARGUMENT
            ), (lo, hi)
        assert lib.nvmlDeviceSetMemoryLockedClocks(handle, 810, 810) == (
            pynvml.NVML_ERROR_INVALID_ARGUMENT
        )
        assert lib.nvmlDeviceSetPowerManagementLimit(handle, 99000) == (
            pynvml.NVML_ERROR_INVALID_ARGUMENT
        )
        assert nvml.gpu(0).writes == 0
        assert lib.nvmlDeviceSetPowerManagementLimit(handle, 100000) == 0
        assert nvml.gpu(0).power_limit_mw == 100000
        assert lib.nvmlDeviceSetPowerManagementLimit(handle, 400000) == 0
    finally:
        assert lib.nvmlShutdown() == 0


# -- reading -----------------------------------------------------------------------------------
def test_open_reads_converted_units_and_throttle_names(nvml):
    with governor.open_device("nvml:0") as dev:
        caps = dev.capabilities
        assert caps.power and caps.energy_counter and caps.lock_gpu_clocks and caps.power_limit
        assert not caps.lock_mem_clock  # an A100-SXM4 has one memory clock
        assert dev.identity.model == "a100-sxm"
        assert dev.identity.uuid == A100["uuid"]
        assert dev.identity.serial == "1320000000001"
        assert dev.identity.driver_version == "550.54.15"
        assert dev.pci_bus_id == A100["pci"]
        s = dev.sample()
        assert s.power_w == pytest.approx(71.0)  # the instant field, mW -> W
        assert dev.power_source == "instant"
        assert s.power_scope == "gpu"
        # the counter (mJ -> J) starts at 123456.789 J and grows at 67 W
        assert 123456.789 <= s.energy_j < 123456.789 + 67 * 30
        assert (s.gpu_clock_mhz, s.mem_clock_mhz, s.temperature_c, s.utilisation_pct) == (
            1410,
            1593,
            33,
            5,
        )
        assert s.throttle_reasons == {"idle", "sw_power_cap"}
        clocks = dev.supported_clocks_mhz()
        assert clocks[0] == 210 and clocks[-1] == 1410 and len(clocks) == 81
        limits = dev.power_limit_range()
        assert (limits.min_w, limits.max_w, limits.default_w) == (100, 400, 400)
        assert dev.control_reason() is None
        assert dev.sample().energy_j >= s.energy_j
    assert _balanced()


def test_power_falls_back_to_the_average_field_then_power_usage(nvml):
    nvml.configure(Gpu(instant_mw=-1))
    with governor.open_device("nvml:0") as dev:
        assert dev.power_source == "average"
        assert dev.sample().power_w == pytest.approx(69.0)
    nvml.configure(Gpu(instant_mw=-1, average_mw=-1))
    with governor.open_device("nvml:0") as dev:
        assert dev.power_source == "usage"
        assert dev.sample().power_w == pytest.approx(67.0)


def test_jetson_orin_via_nvml_reports_capabilities_false_not_errors(nvml):
    nvml.configure(Gpu(name="Orin (nvgpu)", not_supported=ORIN_UNSUPPORTED))
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
    assert _balanced()


def test_each_not_supported_getter_is_one_missing_capability(nvml):
    nvml.configure(
        Gpu(
            not_supported=(
                "nvmlDeviceGetTotalEnergyConsumption",
                "nvmlDeviceGetUtilizationRates",
                "nvmlDeviceGetCurrentClocksEventReasons",
                "nvmlDeviceGetCurrentClocksThrottleReasons",
                "nvmlDeviceGetPowerManagementLimitConstraints",
            )
        ),
        Gpu(not_supported=("nvmlDeviceGetSupportedMemoryClocks",)),
    )
    with governor.open_device("nvml:0") as dev:
        caps = dev.capabilities
        assert caps.power and caps.gpu_clock and caps.temperature and caps.lock_gpu_clocks
        assert not (caps.energy_counter or caps.utilisation or caps.throttle_reasons)
        assert not caps.power_limit and dev.power_limit_range() is None
        s = dev.sample()
        assert s.energy_j is None and s.utilisation_pct is None and s.throttle_reasons == set()
        assert s.power_w == pytest.approx(71.0)
        with pytest.raises(UnsupportedError, match="power limit"):
            dev.set_power_limit(300)
        assert dev.default_state().power_limit_w == 400  # the default is still readable
    with governor.open_device("nvml:1") as dev:
        assert not dev.capabilities.lock_gpu_clocks and dev.supported_clocks_mhz() == ()
        assert dev.capabilities.power_limit
        with pytest.raises(UnsupportedError):
            dev.lock_gpu_clocks(900)
    assert all(gpu.writes == 0 for gpu in nvml.state())


# -- control -----------------------------------------------------------------------------------
def test_lock_and_restore_clocks_and_power_limit(nvml):
    nvml.configure(Gpu(clocks={1593: (210, 1410, 15), 810: (210, 1000, 15)}), count=2)
    with governor.open_device("nvml:0") as dev:
        assert dev.supported_mem_clocks_mhz() == (810.0, 1593.0)
        assert dev.lock_gpu_clocks(1000, 1101) == (1005.0, 1095.0)  # snapped to the 15 MHz table
        assert nvml.gpu(0).gpu_locked == (1005, 1095)
        assert dev.sample().gpu_clock_mhz == 1095
        dev.set_power_limit(250)
        dev.lock_mem_clock(810)
        assert dev.supported_clocks_mhz()[-1] == 990  # the table at 810 MHz memory tops out
        assert dev.state().power_limit_w == 250
        assert dev.changed
        gpu = nvml.gpu(0)
        assert (gpu.gpu_locked, gpu.mem_locked, gpu.power_limit_mw) == (
            (1005, 1095),
            (810, 810),
            250000,
        )
    gpu = nvml.gpu(0)
    assert (gpu.gpu_locked, gpu.mem_locked, gpu.power_limit_mw) == (None, None, 400000)
    assert nvml.gpu(1).writes == 0  # the other GPU was never touched
    assert _balanced()


def test_default_state_is_unlocked_clocks_and_the_default_power_limit(nvml):
    with governor.open_device("nvml:1") as dev:
        assert dev.default_state() == DeviceState(None, None, 70.0)
        dev.set_power_limit(60)
        assert dev.default_state().power_limit_w == 70.0
    nvml.configure(Gpu(not_supported=("nvmlDeviceGetPowerManagementDefaultLimit",)))
    with governor.open_device("nvml:0") as dev:
        assert dev.default_state() == DeviceState()


def test_unprivileged_setters_become_permission_errors_that_say_how(nvml, monkeypatch):
    nvml.configure(unprivileged=True)
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
        with pytest.raises(DevicePermissionError, match="--power-limit=250"):
            dev.set_power_limit(250)
        # a refused write changed nothing, so nothing is left in the journal to undo
        assert not dev.changed and dev.restore() == {}
    finally:
        dev.close()
    assert nvml.gpu(0).writes == 0 and nvml.gpu(0).gpu_locked is None


def test_root_without_the_right_still_gets_a_permission_error(nvml):
    nvml.configure(unprivileged=True)  # e.g. a container that hides the GPU's control files
    with governor.open_device("nvml:1") as dev:
        assert dev.control_reason() is None
        with pytest.raises(DevicePermissionError, match="--reset-memory-clocks|--lock-memory"):
            dev.lock_mem_clock(405)
        assert not dev.changed


def test_not_supported_write_is_unsupported(nvml):
    nvml.configure(count=2, not_supported=("nvmlDeviceSetMemoryLockedClocks",))
    with governor.open_device("nvml:1") as dev:
        assert dev.capabilities.lock_mem_clock  # T4: two memory clocks
        with pytest.raises(UnsupportedError):
            dev.lock_mem_clock(405)
        assert not dev.changed
    assert nvml.gpu(1).mem_locked is None and nvml.gpu(1).writes == 0


def test_power_limit_outside_constraints_is_refused_before_nvml(nvml):
    with governor.open_device("nvml:0") as dev:
        with pytest.raises(InvalidRequestError):
            dev.set_power_limit(50)
    assert nvml.gpu(0).writes == 0


# -- selection and identity --------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, expected",
    [
        ("0", A100),
        ("00", A100),
        (A100["uuid"], A100),
        ("1", T4),
        (T4["uuid"], T4),
        ("0000:3B:00.0", T4),
        ("00000000:3b:00.0", T4),
        ("3B:00.0", T4),
        ("3b:00", None),  # not one of NVML's forms
        ("0:3b:00", T4),
        ("07:00.0", A100),
    ],
)
def test_every_spelling_of_a_gpu_resolves_to_its_physical_identity(nvml, spec, expected):
    if expected is None:
        with pytest.raises(InvalidRequestError, match="PCI bus id"):
            governor.open_device(f"nvml:{spec}")
        return
    with governor.open_device(f"nvml:{spec}") as dev:
        assert dev.uri == f"nvml:{spec}"
        assert dev.identity.key == "nvml:" + expected["uuid"]
        assert dev.identity.name == expected["name"]
        assert dev.pci_bus_id == expected["pci"]
        key = dev.identity.key
    with governor.open_device(key) as again:  # the key is a URI of the same GPU
        assert again.identity.key == key
    assert _balanced()


def test_unknown_gpus_are_not_found(nvml):
    with pytest.raises(DeviceNotFoundError, match="NVML has 2"):
        governor.open_device("nvml:2")
    with pytest.raises(DeviceNotFoundError, match="Not Found"):
        governor.open_device("nvml:GPU-00000000-0000-0000-0000-000000000000")
    with pytest.raises(DeviceNotFoundError, match="Not Found"):
        governor.open_device("nvml:0000:99:00.0")
    with pytest.raises(InvalidRequestError, match="nvml:<index>"):
        governor.open_device("nvml:first")
    assert _balanced()


def test_every_gpu_the_driver_reports_is_found_with_its_own_key(nvml):
    nvml.configure(count=4)
    uris = backend.discover_nvml()
    assert uris == ["nvml:0", "nvml:1", "nvml:2", "nvml:3"]
    keys = set()
    for uri in uris:
        with governor.open_device(uri) as dev:
            keys.add(dev.identity.key)
    assert len(keys) == 4
    nvml.configure(count=0)
    assert backend.discover_nvml() == []
    with pytest.raises(DeviceNotFoundError, match="NVML sees no GPU"):
        governor.open_device("nvml:0")
    assert _balanced()


def test_cuda_visible_devices_does_not_renumber_nvml(nvml, monkeypatch):
    assert backend.discover_nvml() == ["nvml:0", "nvml:1"]
    for visible in ("1", "GPU-7e540001,0", "", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert backend.discover_nvml() == ["nvml:0", "nvml:1"]
        with governor.open_device("nvml:0") as dev:
            assert dev.identity.key == "nvml:" + A100["uuid"]
        with governor.open_device("nvml:1") as dev:
            assert dev.identity.key == "nvml:" + T4["uuid"]


def test_pci_bus_ids_parse_in_nvml_and_cuda_spellings():
    parse = backend.parse_pci_bus_id
    assert parse("00000000:3B:00.0") == parse("0000:3b:00.0") == parse("3B:00.0") == (0, 59, 0, 0)
    assert parse("0001:af:1f.3") == (1, 0xAF, 0x1F, 3)
    assert parse("0000:3b:00") == (0, 59, 0, 0)
    for bad in ("3b:00", "3b", "GPU-1234", "0000:3b:00.8", "0000:3b:000.0", ""):
        assert parse(bad) is None, bad


def test_mig_instance_reads_its_gpu_is_keyed_by_it_and_refuses_control(nvml):
    nvml.configure(Gpu(mig=[MIG_UUID, "MIG-c0ffee01-1111-5222-8333-444444444444"]), Gpu())
    assert backend.discover_nvml() == ["nvml:0", "nvml:1"]  # instances are not GPUs
    with governor.open_device(f"nvml:{MIG_UUID}") as dev:
        assert "MIG" in dev.identity.name
        assert dev.identity.uuid == MIG_UUID
        assert dev.identity.key == "nvml:" + A100["uuid"]  # locks act on the whole GPU
        assert dev.pci_bus_id == A100["pci"]
        assert dev.sample().power_w == pytest.approx(71.0)
        assert not dev.capabilities.lock_gpu_clocks and not dev.capabilities.power_limit
        reason = dev.control_reason()
        assert "MIG" in reason and A100["uuid"] in reason
        with pytest.raises(UnsupportedError):
            dev.lock_gpu_clocks(1005)
    with governor.open_device("nvml:0") as gpu:
        assert gpu.identity.key == "nvml:" + A100["uuid"]
        assert gpu.capabilities.lock_gpu_clocks
    assert all(g.writes == 0 for g in nvml.state())
    assert _balanced()


def test_missing_driver_and_missing_bindings(nvml, monkeypatch):
    nvml.configure(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    assert backend.discover_nvml() == []
    with pytest.raises(DeviceNotFoundError, match="driver"):
        governor.open_device("nvml:0")
    monkeypatch.delenv("FAKE_NVML_CONFIG")  # how every other test sees the loaded fake
    assert backend.discover_nvml() == []
    with pytest.raises(DeviceNotFoundError, match="Driver Not Loaded"):
        governor.open_device("nvml:0")

    def no_module():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(backend, "_import_pynvml", no_module)
    assert backend.discover_nvml() == []
    with pytest.raises(DeviceNotFoundError, match=r"pip install --upgrade gpu-governor"):
        governor.open_device("nvml:0")


# -- across processes --------------------------------------------------------------------------
def _governor(nvml, tmp_path, *args):
    env = nvml.env()
    # not this process's state directory: its journals belong to the other processes
    env["GOVERNOR_STATE_DIR"] = str(tmp_path / "cli-state")
    env["GOVERNOR_DATA_DIR"] = str(tmp_path / "cli-data")
    proc = subprocess.run(
        [sys.executable, "-m", "governor", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_apply_in_one_process_and_reset_in_another_meet_at_the_driver(nvml, tmp_path):
    out = _governor(nvml, tmp_path, "apply", "--device", "nvml:1", "--clock", "1000", "--json")
    assert json.loads(out)["applied"]["gpu_clocks_mhz"] == [1005.0, 1005.0]
    assert nvml.gpu(1).gpu_locked == (1005, 1005)  # the apply process has exited; the GPU stays
    _governor(nvml, tmp_path, "apply", "--device", "nvml:1", "--power-limit", "65")
    assert nvml.gpu(1).power_limit_mw == 65000
    # this process's pynvml sees what the other process set
    with governor.open_device("nvml:1") as dev:
        assert dev.state().power_limit_w == 65
        assert dev.sample().gpu_clock_mhz == 1005
    out = _governor(nvml, tmp_path, "reset", "--device", "nvml:1", "--json")
    assert set(json.loads(out)["devices"][0]["restored"]) == {"gpu_clocks", "power_limit"}
    gpu = nvml.gpu(1)
    assert (gpu.gpu_locked, gpu.power_limit_mw) == (None, 70000)
    assert nvml.gpu(0).writes == 0


def test_a_governor_killed_with_sigkill_is_undone_by_reset_in_another_process(nvml, tmp_path):
    env = nvml.env()
    env["GOVERNOR_STATE_DIR"] = str(tmp_path / "cli-state")
    env["GOVERNOR_DATA_DIR"] = str(tmp_path / "cli-data")
    cmd = [sys.executable, "-m", "governor", "run", "--device", "nvml:1", "--policy", "max"]
    proc = subprocess.Popen(
        [*cmd, "--", sys.executable, "-c", "import time; time.sleep(60)"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while len(nvml.state()) < 2 or nvml.gpu(1).gpu_locked is None:
            assert proc.poll() is None and time.monotonic() < deadline, "the governor never locked"
            time.sleep(0.05)
        assert nvml.gpu(1).gpu_locked == (1590, 1590)  # max: the T4's top clock
    finally:
        proc.kill()
        proc.wait()
    assert nvml.gpu(1).gpu_locked == (1590, 1590)  # nobody restored it: the driver keeps it
    out = _governor(nvml, tmp_path, "reset", "--device", "nvml:1", "--json")
    assert "gpu_clocks" in json.loads(out)["devices"][0]["restored"]
    assert nvml.gpu(1).gpu_locked is None


def test_devices_lists_every_nvml_gpu_with_its_physical_key(nvml, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # CUDA's business, not NVML's
    rows = json.loads(_governor(nvml, tmp_path, "devices", "--json"))["devices"]
    assert [(r["uri"], r["identity"]["key"]) for r in rows if r["kind"] == "nvml"] == [
        ("nvml:0", "nvml:" + A100["uuid"]),
        ("nvml:1", "nvml:" + T4["uuid"]),
    ]


def test_workload_power_profiles_are_read_and_reported_never_fought_silently(nvml, capsys):
    from cli_helpers import run_cli
    from fakes.nvml import Gpu

    # GPU 0 (a Blackwell-era driver) enforces MAX_Q (id 1); GPU 1 has no profiles
    nvml.configure(Gpu(power_profiles=([1, 2], [1])), Gpu())
    with governor.open_device("nvml:0") as dev:
        assert dev.workload_power_profiles() == {
            "requested": ["max_q", "compute"],
            "enforced": ["max_q"],
        }
        assert "max_q" in dev.control_notes()[0]
    with governor.open_device("nvml:1") as dev:
        assert dev.workload_power_profiles() is None and dev.control_notes() == []
    code, out, err = run_cli(capsys, "devices", "--json")
    rows = {r["uri"]: r for r in json.loads(out)["devices"]}
    assert "max_q" in rows["nvml:0"]["control_notes"][0] and rows["nvml:1"]["control_notes"] == []
    code, out, err = run_cli(capsys, "apply", "max", "--device", "nvml:0", "--json")
    assert code == 0 and "workload power profile" in err
    assert any("max_q" in n for n in json.loads(out)["notes"])
    assert run_cli(capsys, "reset", "--device", "nvml:0")[0] == 0
