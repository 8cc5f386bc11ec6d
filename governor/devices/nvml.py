"""The NVML backend: datacenter and workstation GPUs through nvidia-ml-py (``nvml:<index>``).

A GPU is named by any of: its NVML index (``nvml:0``, ``nvml:00``), its UUID
(``nvml:GPU-<uuid>``, or ``nvml:MIG-<uuid>`` for a MIG instance), or its PCI bus id
(``nvml:0000:3B:00.0``, ``nvml:3b:00.0``; any case). NVML numbers GPUs in PCI bus order and
ignores ``CUDA_VISIBLE_DEVICES``, and so does this backend: ``nvml:1`` is NVML's GPU 1 whatever
CUDA sees (CUDA renumbers, fastest first by default; :mod:`governor.calibrate.cuda_loads`
finds a GPU's CUDA ordinal by its UUID and PCI bus id).

Every spelling resolves, at open, to one physical identity: ``Identity.key`` is
``nvml:<UUID of the GPU>`` (for a MIG instance, of its parent GPU, since clock locks and power
limits act on the whole GPU). The key is itself a URI that reopens the same GPU.

Each capability is probed on its own when the device opens: on Jetson Orin ``nvmlInit``
succeeds yet power and clocks raise NotSupported (seen on JetPack 6), so a single failed call
must not hide the others. Units are converted here and nowhere else: NVML reports power in
mW, energy in mJ, clocks in MHz and temperature in °C.

Errors are sorted where they enter (:mod:`governor.devices.nvml_faults`): transient ones
(a timeout, a driver not ready) are tried again a few times and counted
(:meth:`NvmlDevice.fault_counts`); a lost GPU raises :class:`~governor.errors.DeviceLostError`
at once, from opening, reading and writing alike. Of the rest, ``NVMLError_NoPermission`` becomes
:class:`~governor.errors.DevicePermissionError` (with how to get the right),
``NVMLError_NotSupported`` a missing capability or :class:`~governor.errors.UnsupportedError`,
anything else :class:`~governor.errors.TelemetryError` (reads) or
:class:`~governor.errors.GovernorError` (writes).

pynvml is imported only when a device is opened or discovered, through :func:`_import_pynvml`.
The tests run the real nvidia-ml-py over a fake ``libnvidia-ml.so.1`` (tests/fakes/nvml).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from governor.devices.base import (
    Capabilities,
    Device,
    DeviceState,
    Identity,
    PowerLimitRange,
    Sample,
)
from governor.devices.nvml_faults import FaultCounter, call_nvml, kind_of
from governor.errors import (
    DeviceLostError,
    DeviceNotFoundError,
    DevicePermissionError,
    GovernorError,
    InvalidRequestError,
    TelemetryError,
    UnsupportedError,
)
from governor.timebase import Clock

__all__ = ["NvmlDevice", "discover_nvml", "inventory_nvml", "open_nvml", "parse_pci_bus_id"]

log = logging.getLogger("governor.devices.nvml")

# NVML clocks-event (formerly "throttle") reason bits -> base.THROTTLE_REASONS.
# The values are fixed by nvml.h; names are looked up on the module first.
_REASON_BITS = (
    ("nvmlClocksEventReasonGpuIdle", 0x1, "idle"),
    ("nvmlClocksEventReasonApplicationsClocksSetting", 0x2, "clocks_setting"),
    ("nvmlClocksEventReasonSwPowerCap", 0x4, "sw_power_cap"),
    ("nvmlClocksEventReasonHwSlowdown", 0x8, "hw_slowdown"),
    ("nvmlClocksEventReasonSyncBoost", 0x10, "sync_boost"),
    ("nvmlClocksEventReasonSwThermalSlowdown", 0x20, "sw_thermal"),
    ("nvmlClocksEventReasonHwThermalSlowdown", 0x40, "hw_thermal"),
    ("nvmlClocksEventReasonHwPowerBrakeSlowdown", 0x80, "hw_power_brake"),
    ("nvmlClocksEventReasonDisplayClockSetting", 0x100, "display_clock"),
)

# NVML device names -> catalog names (boards.md). First match wins.
_MODELS = (
    (r"A100.*SXM", "a100-sxm"),
    (r"A100.*PCI", "a100-pcie"),
    (r"H100.*PCI", "h100-pcie"),
    (r"H100", "h100-sxm"),
    (r"V100", "v100"),
    (r"\bT4\b", "t4"),
    (r"\bL4\b", "l4"),
    (r"RTX A4000", "rtx-a4000"),
    (r"RTX A6000", "rtx-a6000"),
    (r"TITAN X\b", "titan-x"),
)

_PERMISSION_HINT = (
    "run as root (sudo), or through the governor daemon; an administrator can also set it "
    "with `sudo nvidia-smi {flag}`"
)


def _import_pynvml() -> Any:
    """The pynvml module (nvidia-ml-py)."""
    import pynvml

    return pynvml


def _is_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return bool(geteuid and geteuid() == 0)


def _error_class(nv: Any, name: str) -> type:
    cls = getattr(nv, name, None)
    return cls if isinstance(cls, type) else type(None)


def _is(nv: Any, err: BaseException, name: str) -> bool:
    return isinstance(err, _error_class(nv, name))


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def catalog_model(name: str) -> str:
    """The catalog name for an NVML device name (``NVIDIA A100-SXM4-80GB`` -> ``a100-sxm``)."""
    for pattern, model in _MODELS:
        if re.search(pattern, name, re.IGNORECASE):
            return model
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-")
    return slug or "nvidia-gpu"


# -- PCI bus ids ----------------------------------------------------------------------------
_PCI_FORMS = (
    # domain:bus:device.function, domain:bus:device, bus:device.function (NVML's forms)
    re.compile(r"(?P<d>[0-9a-f]{1,8}):(?P<b>[0-9a-f]{1,2}):(?P<v>[0-9a-f]{1,2})\.(?P<f>[0-7])"),
    re.compile(r"(?P<d>[0-9a-f]{1,8}):(?P<b>[0-9a-f]{1,2}):(?P<v>[0-9a-f]{1,2})"),
    re.compile(r"(?P<b>[0-9a-f]{1,2}):(?P<v>[0-9a-f]{1,2})\.(?P<f>[0-7])"),
)


def parse_pci_bus_id(text: str) -> Optional[Tuple[int, int, int, int]]:
    """(domain, bus, device, function) of a PCI bus id in NVML's or CUDA's spelling, or None.

    ``00000000:3B:00.0`` (NVML), ``0000:3b:00.0`` (CUDA, lspci) and ``3B:00.0`` all give
    ``(0, 0x3B, 0, 0)``.
    """
    text = text.strip().lower()
    for form in _PCI_FORMS:
        match = form.fullmatch(text)
        if match:
            parts = match.groupdict()
            return (
                int(parts.get("d") or "0", 16),
                int(parts["b"], 16),
                int(parts["v"], 16),
                int(parts.get("f") or "0", 16),
            )
    return None


def _nvml_pci_text(pci: Tuple[int, int, int, int]) -> str:
    """NVML's own spelling of a PCI bus id (``00000000:3B:00.0``)."""
    return "{:08X}:{:02X}:{:02X}.{:X}".format(*pci)


# -- the device ------------------------------------------------------------------------------
class NvmlDevice(Device):
    """One NVIDIA GPU (or MIG instance) through NVML. See the module docstring."""

    READ_BLIND = frozenset({"gpu_clocks", "mem_clock"})  # NVML has no getter for the locks

    def __init__(
        self,
        nv: Any,
        handle: Any,
        *,
        uri: str,
        mig_parent: Any = None,
        clock: Optional[Clock] = None,
    ) -> None:
        self._nv = nv
        self._where = uri  # for error messages before the identity exists
        self._faults = FaultCounter()
        self._handle = handle  # the GPU (the parent GPU for a MIG instance)
        self._mig = mig_parent is not None
        if self._mig:
            self._handle = mig_parent
        self._locked: Optional[Tuple[float, float]] = None
        self._mem_locked: Optional[float] = None
        self.power_source: Optional[str] = None  # "instant" | "average" | "usage"
        self._reason_reader: Optional[Callable[[Any], int]] = None
        self._mem_to_graphics: Dict[float, Tuple[float, ...]] = {}
        self._limits: Optional[PowerLimitRange] = None
        self._default_limit_w: Optional[float] = None
        name = _text(self._try(nv.nvmlDeviceGetName, handle) or "NVIDIA GPU")
        caps = self._probe()
        #: the PCI bus id of the GPU in NVML's spelling (``00000000:3B:00.0``), None if unread
        self.pci_bus_id: Optional[str] = None
        pci = self._try(nv.nvmlDeviceGetPciInfo, self._handle)
        if pci is not None:
            parsed = parse_pci_bus_id(_text(pci.busId))
            self.pci_bus_id = _nvml_pci_text(parsed) if parsed else None
        minor_getter = getattr(nv, "nvmlDeviceGetMinorNumber", None)  # older bindings lack it
        minor = self._try(minor_getter, self._handle) if minor_getter is not None else None
        self._nodes = () if minor is None else (f"/dev/nvidia{int(minor)}",)
        gpu_uuid = _optional_text(self._try(nv.nvmlDeviceGetUUID, self._handle))
        physical = gpu_uuid or self.pci_bus_id
        identity = Identity(
            uri=uri,
            kind="nvml",
            name=name + (" (MIG instance)" if self._mig else ""),
            model=catalog_model(name),
            serial=_optional_text(self._try(nv.nvmlDeviceGetSerial, self._handle)),
            uuid=_optional_text(self._try(nv.nvmlDeviceGetUUID, handle)),
            driver_version=_optional_text(self._try(nv.nvmlSystemGetDriverVersion)),
            key=f"nvml:{physical}" if physical else None,
        )
        super().__init__(identity, caps, clock=clock)

    # -- probing ---------------------------------------------------------------------------
    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` with transient errors tried again (see nvml_faults).

        Raises:
            DeviceLostError: the GPU is lost; nv.NVMLError: any other error.
        """
        return call_nvml(self._nv, self._where, self._faults, fn, *args)

    def fault_counts(self) -> Dict[str, int]:
        return self._faults.to_dict()

    def device_nodes(self) -> Tuple[str, ...]:
        return self._nodes

    def _try(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call an NVML getter; None when unsupported or failing (for probing only).

        Raises:
            DeviceLostError: the GPU is lost (probing it would only find nothing).
        """
        try:
            return self._call(fn, *args)
        except self._nv.NVMLError as err:
            log.debug("NVML %s%r: %s", getattr(fn, "__name__", fn), args[1:], err)
            return None

    def _works(self, fn: Callable[..., Any], *args: Any) -> bool:
        return self._try(fn, *args) is not None

    def _probe(self) -> Capabilities:
        nv, h = self._nv, self._handle
        self.power_source = self._probe_power()
        energy = self._works(nv.nvmlDeviceGetTotalEnergyConsumption, h)
        gpu_clock = self._works(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_GRAPHICS)
        mem_clock = self._works(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
        temperature = self._works(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        utilisation = self._works(nv.nvmlDeviceGetUtilizationRates, h)
        for getter in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            fn = getattr(nv, getter, None)
            if fn is not None and self._works(fn, h):
                self._reason_reader = fn
                break
        mems = self._try(nv.nvmlDeviceGetSupportedMemoryClocks, h) or []
        for mem in mems:
            graphics = self._try(nv.nvmlDeviceGetSupportedGraphicsClocks, h, mem) or []
            if graphics:
                self._mem_to_graphics[float(mem)] = tuple(sorted(float(g) for g in graphics))
        constraints = self._try(nv.nvmlDeviceGetPowerManagementLimitConstraints, h)
        default = self._try(nv.nvmlDeviceGetPowerManagementDefaultLimit, h)
        if default:
            self._default_limit_w = default / 1000.0
        if constraints and default:
            try:
                self._limits = PowerLimitRange(
                    constraints[0] / 1000.0, constraints[1] / 1000.0, default / 1000.0
                )
            except ValueError:
                log.debug(
                    "NVML power limit constraints %r default %r are inconsistent",
                    constraints,
                    default,
                )
        controllable = not self._mig
        return Capabilities(
            power=self.power_source is not None,
            energy_counter=energy,
            rails=False,
            gpu_clock=gpu_clock,
            mem_clock=mem_clock,
            temperature=temperature,
            utilisation=utilisation,
            throttle_reasons=self._reason_reader is not None,
            lock_gpu_clocks=controllable and bool(self._mem_to_graphics),
            lock_mem_clock=controllable and len(self._mem_to_graphics) > 1,
            power_limit=controllable and self._limits is not None,
            power_mode=False,
        )

    def _probe_power(self) -> Optional[str]:
        nv = self._nv
        fields = (
            ("instant", getattr(nv, "NVML_FI_DEV_POWER_INSTANT", None)),
            ("average", getattr(nv, "NVML_FI_DEV_POWER_AVERAGE", None)),
        )
        for source, field_id in fields:
            if field_id is not None and self._field_power_mw(field_id) is not None:
                return source
        if self._works(nv.nvmlDeviceGetPowerUsage, self._handle):
            return "usage"
        return None

    def _field_power_mw(self, field_id: int) -> Optional[float]:
        """One power field in mW, or None when the driver does not have it."""
        values = self._try(self._nv.nvmlDeviceGetFieldValues, self._handle, [field_id])
        if not values:
            return None
        value = values[0]
        if getattr(value, "nvmlReturn", 1) != getattr(self._nv, "NVML_SUCCESS", 0):
            return None
        union = value.value
        kind = getattr(value, "valueType", None)
        if kind == getattr(self._nv, "NVML_VALUE_TYPE_DOUBLE", 0):
            return float(union.dVal)
        if kind == getattr(self._nv, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3):
            return float(union.ullVal)
        return float(union.uiVal)

    # -- description ------------------------------------------------------------------------
    def _supported_clocks_mhz(self) -> Sequence[float]:
        if not self._mem_to_graphics:
            return ()
        mem = self._current_mem_key()
        return self._mem_to_graphics[mem]

    def _supported_mem_clocks_mhz(self) -> Sequence[float]:
        return tuple(self._mem_to_graphics) if len(self._mem_to_graphics) > 1 else ()

    def supported_clocks_by_mem_mhz(self) -> Dict[float, Tuple[float, ...]]:
        """Graphics clocks (MHz) NVML supports at each memory clock (MHz)."""
        return dict(self._mem_to_graphics)

    def _current_mem_key(self) -> float:
        mems = sorted(self._mem_to_graphics)
        wanted = self._mem_locked
        if wanted is None and self.capabilities.mem_clock:
            try:
                current = self._try(
                    self._nv.nvmlDeviceGetClockInfo, self._handle, self._nv.NVML_CLOCK_MEM
                )
            except DeviceLostError:  # describing a lost GPU: its table at the top memory clock
                current = None
            wanted = float(current) if current is not None else None
        if wanted is None:
            return mems[-1]
        target: float = wanted
        return min(mems, key=lambda m: abs(m - target))

    def power_limit_range(self) -> Optional[PowerLimitRange]:
        return self._limits

    def default_state(self) -> DeviceState:
        """The driver's defaults: clocks unlocked, the default power limit (W; None if NVML
        does not report one)."""
        return DeviceState(
            gpu_clocks_mhz=None, mem_clock_mhz=None, power_limit_w=self._default_limit_w
        )

    def control_permitted(self) -> bool:
        return self.control_reason() is None

    def control_reason(self) -> Optional[str]:
        """Why this process may not change settings (None when it may)."""
        caps = self.capabilities
        if self._mig:
            return "a MIG instance: clocks and power limits belong to the whole GPU" + (
                f" (open {self.identity.key})" if self.identity.key else ""
            )
        if not (caps.lock_gpu_clocks or caps.power_limit):
            if not caps.power and not caps.gpu_clock:
                return "not supported via NVML (on Jetson use the jetson backend)"
            return "not supported by this GPU or driver via NVML"
        if not _is_root():
            return "needs root: run with sudo or use the governor daemon"
        return None

    def workload_power_profiles(self) -> Optional[Dict[str, List[str]]]:
        """The workload power profiles (Blackwell and later) requested and enforced on this GPU,
        by name (``max_q``, ``compute``...); None where the driver or GPU has none."""
        nv = self._nv
        struct = getattr(nv, "c_nvmlWorkloadPowerProfileCurrentProfiles_v1_t", None)
        getter = getattr(nv, "nvmlDeviceWorkloadPowerProfileGetCurrentProfiles", None)
        if struct is None or getter is None:
            return None
        current = struct()
        try:
            getter(self._handle, ctypes.byref(current))  # the binding passes it on as given
        except nv.NVMLError as err:
            log.debug("%s: no workload power profiles: %s", self.uri, err)
            return None
        names = {
            int(value): attr[len("NVML_POWER_PROFILE_") :].lower()
            for attr, value in vars(nv).items()
            if attr.startswith("NVML_POWER_PROFILE_")
            and not attr.startswith("NVML_POWER_PROFILE_OPERATION")
            and attr != "NVML_POWER_PROFILE_MAX"
            and isinstance(value, int)
        }

        def decode(mask: Any) -> List[str]:
            words = list(mask.mask)
            return [
                names.get(i, f"profile {i}")
                for i in range(32 * len(words))
                if words[i // 32] >> (i % 32) & 1
            ]

        return {
            "requested": decode(current.requestedProfilesMask),
            "enforced": decode(current.enforcedProfilesMask),
        }

    def parts(self) -> List[Dict[str, Any]]:
        """The MIG instances of this GPU; their power figures are the whole GPU's."""
        nv = self._nv
        if self._mig or not hasattr(nv, "nvmlDeviceGetMigDeviceHandleByIndex"):
            return []
        try:
            count = int(nv.nvmlDeviceGetMaxMigDeviceCount(self._handle))
        except nv.NVMLError:
            return []
        found = []
        for index in range(count):
            try:
                handle = nv.nvmlDeviceGetMigDeviceHandleByIndex(self._handle, index)
                uuid = _text(nv.nvmlDeviceGetUUID(handle))
            except nv.NVMLError:
                continue
            found.append(
                {"uri": f"nvml:{uuid}", "name": f"MIG instance {index}", "power_scope": "whole GPU"}
            )
        return found

    def control_notes(self) -> List[str]:
        profiles = self.workload_power_profiles()
        if not profiles or not profiles["enforced"]:
            return []
        return [
            f"{self.uri}: the driver enforces workload power profile(s) "
            f"{', '.join(profiles['enforced'])}, which can hold the GPU below the clocks governor "
            "locks; clear them with nvidia-smi if governor should decide"
        ]

    # -- reading ----------------------------------------------------------------------------
    def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return self._call(fn, *args)
        except self._nv.NVMLError as err:
            raise TelemetryError(f"{self.uri}: NVML {fn.__name__} failed: {err}") from err

    def _read_power_w(self) -> Optional[float]:
        nv = self._nv
        if self.power_source in ("instant", "average"):
            field_id = (
                nv.NVML_FI_DEV_POWER_INSTANT
                if self.power_source == "instant"
                else nv.NVML_FI_DEV_POWER_AVERAGE
            )
            milliwatts = self._field_power_mw(field_id)
            if milliwatts is not None:
                return milliwatts / 1000.0
        if self.power_source is not None:
            return float(self._read(nv.nvmlDeviceGetPowerUsage, self._handle)) / 1000.0
        return None

    def _read_reasons(self) -> FrozenSet[str]:
        if self._reason_reader is None:
            return frozenset()
        bits = int(self._read(self._reason_reader, self._handle))
        names = set()
        for attr, default, reason in _REASON_BITS:
            if bits & int(getattr(self._nv, attr, default)):
                names.add(reason)
        return frozenset(names)

    def _read_energy_counter_j(self) -> Optional[float]:
        nv = self._nv
        return float(self._read(nv.nvmlDeviceGetTotalEnergyConsumption, self._handle)) / 1000.0

    def _read_sample(self) -> Sample:
        nv, h, caps = self._nv, self._handle, self.capabilities
        t_s = self.clock.now_s()
        power_w = self._read_power_w() if caps.power else None
        energy_j = (
            float(self._read(nv.nvmlDeviceGetTotalEnergyConsumption, h)) / 1000.0
            if caps.energy_counter
            else None
        )
        gpu_mhz = (
            float(self._read(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_GRAPHICS))
            if caps.gpu_clock
            else None
        )
        mem_mhz = (
            float(self._read(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM))
            if caps.mem_clock
            else None
        )
        temp_c = (
            float(self._read(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU))
            if caps.temperature
            else None
        )
        util = (
            float(self._read(nv.nvmlDeviceGetUtilizationRates, h).gpu) if caps.utilisation else None
        )
        return Sample(
            t_s=t_s,
            power_w=power_w,
            power_scope=(None if power_w is None else "whole GPU" if self._mig else "gpu"),
            energy_j=energy_j,
            gpu_clock_mhz=gpu_mhz,
            mem_clock_mhz=mem_mhz,
            temperature_c=temp_c,
            utilisation_pct=util,
            throttle_reasons=self._read_reasons(),
        )

    def _read_state(self) -> DeviceState:
        # NVML cannot report locked clocks, so the state is what this process set (None =
        # the driver's default); the power limit is read back from the GPU.
        limit = None
        if self.capabilities.power_limit:
            limit = (
                float(self._read(self._nv.nvmlDeviceGetPowerManagementLimit, self._handle)) / 1000.0
            )
        return DeviceState(
            gpu_clocks_mhz=self._locked,
            mem_clock_mhz=self._mem_locked,
            power_limit_w=limit,
        )

    # -- writing ----------------------------------------------------------------------------
    def _write(self, what: str, flag: str, fn: Callable[..., Any], *args: Any) -> None:
        nv = self._nv
        try:
            self._call(fn, self._handle, *args)
        except nv.NVMLError as err:
            if _is(nv, err, "NVMLError_NoPermission"):
                raise DevicePermissionError(
                    f"NVML refused to change {what} of {self.uri} (no permission): "
                    + _PERMISSION_HINT.format(flag=flag)
                ) from err
            if _is(nv, err, "NVMLError_NotSupported"):
                raise UnsupportedError(
                    f"{self.identity.name} ({self.uri}) does not support changing {what}"
                ) from err
            if _is(nv, err, "NVMLError_InvalidArgument"):
                raise InvalidRequestError(
                    f"NVML rejected {what} {args} for {self.uri}: {err}"
                ) from err
            raise GovernorError(f"NVML failed to change {what} of {self.uri}: {err}") from err

    def _write_gpu_clocks(self, min_mhz: float, max_mhz: float) -> None:
        self._write(
            "the GPU clock",
            f"--lock-gpu-clocks={min_mhz:g},{max_mhz:g}",
            self._nv.nvmlDeviceSetGpuLockedClocks,
            int(round(min_mhz)),
            int(round(max_mhz)),
        )
        self._locked = (min_mhz, max_mhz)

    def _reset_gpu_clocks(self) -> None:
        self._write("the GPU clock", "--reset-gpu-clocks", self._nv.nvmlDeviceResetGpuLockedClocks)
        self._locked = None

    def _write_mem_clock(self, clock_mhz: Optional[float]) -> None:
        if clock_mhz is None:
            self._write(
                "the memory clock",
                "--reset-memory-clocks",
                self._nv.nvmlDeviceResetMemoryLockedClocks,
            )
        else:
            mhz = int(round(clock_mhz))
            self._write(
                "the memory clock",
                f"--lock-memory-clocks={mhz},{mhz}",
                self._nv.nvmlDeviceSetMemoryLockedClocks,
                mhz,
                mhz,
            )
        self._mem_locked = clock_mhz

    def _write_power_limit(self, power_w: float) -> None:
        self._write(
            "the power limit",
            f"--power-limit={power_w:g}",
            self._nv.nvmlDeviceSetPowerManagementLimit,
            int(round(power_w * 1000.0)),
        )

    def _close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except self._nv.NVMLError as err:  # pragma: no cover - shutdown of a lost GPU
            log.debug("nvmlShutdown: %s", err)


def _optional_text(value: Any) -> Optional[str]:
    return None if value is None else _text(value)


# -- opening and discovery -------------------------------------------------------------------
def _init(nv: Any) -> None:
    try:
        nv.nvmlInit()
    except nv.NVMLError as err:
        raise DeviceNotFoundError(
            f"NVML is not available ({err}): is the NVIDIA driver installed and loaded?"
        ) from err


def _handle_for(nv: Any, spec: str) -> Tuple[Any, Any]:
    """(handle, MIG parent or None) for ``spec``: an NVML index, a UUID or a PCI bus id.

    Raises:
        InvalidRequestError: ``spec`` is none of those.
        DeviceNotFoundError: NVML has no such GPU.
    """
    try:
        if re.fullmatch(r"[0-9]+", spec):
            count = int(nv.nvmlDeviceGetCount())
            if int(spec) >= count:
                raise DeviceNotFoundError(
                    f"no GPU nvml:{spec}: NVML has {count} (indices 0-{count - 1}, in PCI bus "
                    "order; CUDA_VISIBLE_DEVICES does not renumber them)"
                    if count
                    else f"no GPU nvml:{spec}: NVML sees no GPU"
                )
            handle = nv.nvmlDeviceGetHandleByIndex(int(spec))
        elif spec[:4].upper() in ("GPU-", "MIG-"):
            handle = nv.nvmlDeviceGetHandleByUUID(spec[:4].upper() + spec[4:])
        else:
            pci = parse_pci_bus_id(spec)
            if pci is None:
                raise InvalidRequestError(
                    f"bad NVML device {spec!r}: use nvml:<index>, nvml:GPU-<uuid>, "
                    "nvml:MIG-<uuid> or nvml:<PCI bus id> such as nvml:0000:3B:00.0"
                )
            handle = nv.nvmlDeviceGetHandleByPciBusId(_nvml_pci_text(pci))
    except nv.NVMLError as err:
        if kind_of(err) == "lost":
            raise DeviceLostError(
                f"nvml:{spec}: the GPU is lost (NVML: {err}); it needs to come back on the bus "
                "or be reset before governor can read or change it"
            ) from err
        raise DeviceNotFoundError(f"no GPU nvml:{spec} in NVML: {err}") from err
    parent = None
    is_mig = getattr(nv, "nvmlDeviceIsMigDeviceHandle", None)
    if is_mig is not None:
        try:
            if bool(is_mig(handle)):
                parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
        except nv.NVMLError:
            parent = None
    return handle, parent


def open_nvml(spec: str, *, clock: Optional[Clock] = None) -> NvmlDevice:
    """Open ``nvml:<index>`` (NVML's index), ``nvml:<GPU-/MIG-uuid>`` or ``nvml:<PCI bus id>``.

    Raises:
        DeviceNotFoundError: nvidia-ml-py missing, no driver, or no such GPU.
        InvalidRequestError: ``spec`` is not one of those forms.
    """
    spec = (spec or "0").strip()
    try:
        nv = _import_pynvml()
    except ImportError as err:
        raise DeviceNotFoundError(
            "the nvml backend needs nvidia-ml-py: pip install --upgrade gpu-governor (it brings nvidia-ml-py)"
        ) from err
    from governor.devices.deadline import call_with_deadline, deadlines_s

    def opening() -> NvmlDevice:
        _init(nv)
        try:
            handle, parent = _handle_for(nv, spec)
            return NvmlDevice(nv, handle, uri=f"nvml:{spec}", mig_parent=parent, clock=clock)
        except BaseException:
            try:
                nv.nvmlShutdown()
            except nv.NVMLError:  # pragma: no cover
                pass
            raise

    # a wedged GPU blocks its handle and probes: opening has a deadline of its own
    device: NvmlDevice = call_with_deadline(
        f"nvml:{spec}", "opening it", deadlines_s()["open"], opening, _close_late
    )
    return device


def _close_late(device: Any) -> None:
    """Close a device whose opening answered after its deadline (nobody holds it)."""
    device.close()


def _answers(nv: Any, index: int) -> Tuple[bool, List[Any]]:
    """(whether GPU ``index`` reads power or a clock, the NVML errors met)."""
    errors: List[Any] = []
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
    except nv.NVMLError as err:
        return False, [err]
    for fn, args in (
        (nv.nvmlDeviceGetPowerUsage, (handle,)),
        (nv.nvmlDeviceGetClockInfo, (handle, nv.NVML_CLOCK_GRAPHICS)),
    ):
        try:
            fn(*args)
            return True, errors
        except nv.NVMLError as err:
            errors.append(err)
    return False, errors


def discover_nvml(lost: Optional[List[str]] = None) -> List[str]:
    """``nvml:N`` for every GPU NVML can read (NVML's indices, whatever
    ``CUDA_VISIBLE_DEVICES`` says); [] without driver or bindings.

    A GPU that reports neither power nor clocks (Jetson's integrated GPU) is left to the
    jetson backend. A GPU NVML counts but reports lost (off the bus, needing a reset) is left
    out too; its ``nvml:N`` is added to ``lost`` when given, for a service that watches every
    GPU of the host until it answers (the exporter).
    """
    from governor.devices.deadline import call_with_deadline, deadlines_s
    from governor.devices.nvml_faults import kind_of
    from governor.errors import DeviceNotRespondingError

    try:
        nv = _import_pynvml()
    except ImportError:
        return []
    try:
        nv.nvmlInit()
    except Exception as err:  # NVMLError, or OSError from a broken library
        log.debug("NVML discovery: %s", err)
        return []
    found = []
    read_s = deadlines_s()["read"]
    try:
        for index in range(int(nv.nvmlDeviceGetCount())):
            try:  # a wedged GPU is counted with the lost ones, not waited for
                readable, errors = call_with_deadline(
                    f"nvml:{index}", "discovery", read_s, functools.partial(_answers, nv, index)
                )
            except DeviceNotRespondingError as err:
                log.warning("%s", err)
                if lost is not None:
                    lost.append(f"nvml:{index}")
                continue
            if readable:
                found.append(f"nvml:{index}")
            elif lost is not None and any(kind_of(err) == "lost" for err in errors):
                lost.append(f"nvml:{index}")
    except nv.NVMLError as err:
        log.debug("NVML discovery: %s", err)
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # pragma: no cover
            pass
    return found


def inventory_nvml() -> List[Dict[str, Any]]:
    """Every GPU NVML lists, in NVML index order: ``{"index", "uuid", "minor", "name",
    "model", "pci_bus_id"}``. ``minor`` is the N of ``/dev/nvidiaN`` (what Slurm's gres.conf
    names and what ``SLURM_JOB_GPUS`` counts by), None where NVML does not report it (Jetson).
    A GPU that is lost (off the bus) is ``{"index", "lost"}`` (``lost``: one line saying so),
    so that a caller can say why a GPU it expected is missing.

    Raises:
        DeviceNotFoundError: nvidia-ml-py missing or no driver.
    """
    try:
        nv = _import_pynvml()
    except ImportError as err:
        raise DeviceNotFoundError("the nvml backend needs nvidia-ml-py") from err
    from governor.devices.deadline import call_with_deadline, deadlines_s
    from governor.errors import DeviceNotRespondingError

    _init(nv)
    found: List[Dict[str, Any]] = []
    read_s = deadlines_s()["read"]
    try:
        for index in range(int(nv.nvmlDeviceGetCount())):
            try:  # a wedged GPU is listed as not answering, not waited for
                row = call_with_deadline(
                    f"nvml:{index}", "listing", read_s, functools.partial(_inventory_row, nv, index)
                )
            except DeviceNotRespondingError as err:
                found.append({"index": index, "lost": str(err)})
                continue
            if row is not None:
                found.append(row)
    except nv.NVMLError as err:
        raise DeviceNotFoundError(f"NVML could not list its GPUs: {err}") from err
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # pragma: no cover
            pass
    return found


def _inventory_row(nv: Any, index: int) -> Optional[Dict[str, Any]]:
    """GPU ``index`` as :func:`inventory_nvml` lists it; None when NVML cannot read it (a
    lost one is ``{"index", "lost"}``).

    Raises:
        nv.NVMLError: listing the GPUs failed.
    """
    try:
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nv.nvmlDeviceGetUUID(handle))
    except nv.NVMLError as err:
        log.debug("NVML GPU %d: %s", index, err)
        if kind_of(err) == "lost":
            return {"index": index, "lost": f"nvml:{index}: the GPU is lost ({err})"}
        return None
    row: Dict[str, Any] = {"index": index, "uuid": uuid, "minor": None}
    getter = getattr(nv, "nvmlDeviceGetMinorNumber", None)
    if getter is not None:
        try:
            row["minor"] = int(getter(handle))
        except nv.NVMLError as err:
            log.debug("NVML GPU %d has no minor number: %s", index, err)
    try:
        name = _text(nv.nvmlDeviceGetName(handle))
    except nv.NVMLError:
        name = "NVIDIA GPU"
    row["name"] = name
    row["model"] = catalog_model(name)
    try:
        parsed = parse_pci_bus_id(_text(nv.nvmlDeviceGetPciInfo(handle).busId))
        row["pci_bus_id"] = _nvml_pci_text(parsed) if parsed else None
    except nv.NVMLError:
        row["pci_bus_id"] = None
    return row
