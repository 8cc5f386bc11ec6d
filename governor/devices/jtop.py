"""The ``jtop`` device: telemetry from the jetson-stats service, without root.

jetson-stats (extra ``jetson``) is AGPL-3.0: governor only imports it, optionally, and copies
nothing. Its service (``jtop.service``, socket ``/run/jtop.sock``) reads the board as root and
serves clients, so telemetry works for any user. Power modes and jetson_clocks are switched
through jtop (the service does it); GPU clocks are locked through the sysfs code of the
``jetson`` backend, which needs root.

What a jetson-stats client returns differs by version and board (recorded, with the source
file of each shape, in ``tests/data/jtop/``); this backend reads all of them:

- ``jetson.gpu`` is keyed by the GPU's device-tree name (``gpu`` on Nano and JetPack 6,
  ``gp10b`` TX2, ``gv11b`` Xavier, ``ga10b`` Orin on JetPack 5) up to 4.3.x, and by the NVML
  name (``Thor``) when 7.x reads the GPU through NVML. ``freq`` is in kHz, except that NVML
  fills ``cur``/``max`` in MHz; there the devfreq clock in kHz is ``freq["GPC"][0]``.
- ``jetson.temperature`` keys follow the thermal zones: ``GPU`` (Nano, TX2, Xavier, Orin on
  JetPack 5), ``gpu`` (JetPack 6, Thor). A sensor that cannot be read reports -256 °C with
  ``online: False`` (Orin's CV zones, Thor's GPU zone while the GPU is rail-gated): dropped.
- ``jetson.power["rail"][NAME]``: ``power`` (mW), ``volt`` (mV), ``curr`` (mA), ``online``.
  The board input (``VDD_IN``, ``POM_5V_IN``) is moved out of the rails into
  ``power["tot"]`` with its ``name``; a ``tot`` without a name is jtop's sum of whatever it
  listed (double counts on AGX Orin, includes USB-C supplies) and is not used. jetson-stats
  up to 7.2 does not see Thor's INA238, so its input rail is read from sysfs here.
- Every property returns the service's latest dictionary without waiting; only ``ok()``
  blocks (about one jtop interval) unless called with ``spin=True``, which is how it is
  called here, so a sample never stalls a control loop.
- ``jetson.nvpmodel = NAME`` only queues a request: the service switches in a thread and may
  drop it silently (a switch already running, another GPU TPC mask in 4.3.x, ``nvpmodel``
  failing). The switch is therefore confirmed by reading the mode back.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, List, Optional, Tuple

from governor.devices.base import Capabilities, DeviceState, Rail, Sample
from governor.devices.jetson.device import JetsonDevice, open_board
from governor.devices.jetson.rails import RailSource, best_rail, find_input_rails, rail_scope
from governor.devices.jetson.sysfs import SysfsRoot
from governor.devices.jetson.tools import mode_gpu_cap_mhz
from governor.errors import (
    DeviceNotFoundError,
    GovernorError,
    InvalidRequestError,
    TelemetryError,
)
from governor.timebase import Clock

__all__ = ["JtopDevice", "discover_jtop", "open_jtop"]

log = logging.getLogger("governor.devices.jtop")

SOCKET = "/run/jtop.sock"
# How long a power-mode switch may take to show (nvpmodel itself can take seconds), and how
# often the mode is read back meanwhile.
MODE_TIMEOUT_S = 15.0
MODE_POLL_S = 0.1
# Device-tree names of Jetson GPUs, preferred in this order when jtop lists several.
_GPU_NAMES = ("gpu", "ga10b", "gv11b", "gp10b", "gb10b")
_OFFLINE_C = -40.0  # jtop reports -256 °C for a sensor it cannot read


def _import_jtop() -> Any:
    """The ``jtop`` module of jetson-stats. Tests replace this function with a fake module."""
    import jtop

    return jtop


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _as_dict(value: Any) -> Dict[str, Any]:
    """jtop's GPU object (or a plain dict) as a dict; anything else as {}."""
    if isinstance(value, dict):
        return value
    items = getattr(value, "items", None)
    if callable(items):
        try:
            return dict(items())
        except (TypeError, ValueError):
            return {}
    return {}


def gpu_entry(gpu: Dict[str, Any]) -> Tuple[Optional[str], Dict[str, Any]]:
    """(name, entry) of the board's GPU in ``jetson.gpu``: an integrated GPU by its known
    device-tree name first, else the first integrated one, else the first one."""
    entries = [(str(k), v) for k, v in gpu.items() if isinstance(v, dict)]
    if not entries:
        return None, {}
    integrated = [(k, v) for k, v in entries if v.get("type", "integrated") == "integrated"]
    pool = integrated or entries
    for known in _GPU_NAMES:
        for name, entry in pool:
            if name.lower() == known:
                return name, entry
    return pool[0]


def gpu_clock_mhz(entry: Dict[str, Any]) -> Optional[float]:
    """The GPU clock (MHz) of a ``jetson.gpu`` entry; NVML-read entries (jetson-stats 7.x on
    Thor) keep the devfreq clock in kHz in ``GPC`` and may hold MHz in ``cur``."""
    freq = entry.get("freq") or {}
    if entry.get("power_control") == "nvml":
        gpc = freq.get("GPC") or []
        khz = _number(gpc[0]) if gpc else None
        if khz is not None:
            return khz / 1000.0
        return _number(freq.get("cur"))
    khz = _number(freq.get("cur"))
    return khz / 1000.0 if khz is not None else None


def _online_c(sensor: Any) -> Optional[float]:
    if not isinstance(sensor, dict) or sensor.get("online") is False:
        return None
    value = _number(sensor.get("temp"))
    return value if value is not None and value > _OFFLINE_C else None


def gpu_temperature_c(temperature: Dict[str, Any], entry: Dict[str, Any]) -> Optional[float]:
    """The GPU sensor (``GPU`` or ``gpu``) when online, else the temperature NVML gave the
    GPU entry, else None. Other sensors are never averaged in."""
    for name, sensor in temperature.items():
        if str(name).lower() == "gpu":
            value = _online_c(sensor)
            if value is not None:
                return value
    value = _number((entry.get("status") or {}).get("temperature"))
    return value if value is not None and value > _OFFLINE_C else None


def power_rails(power: Dict[str, Any]) -> List[Rail]:
    """The online rails of ``jetson.power`` in W, and the board input from ``tot`` when jtop
    named it (``VDD_IN``/``POM_5V_IN``)."""
    rails: List[Rail] = []

    def add(name: str, r: Dict[str, Any]) -> None:
        mw = _number(r.get("power"))
        if mw is None or r.get("online") is False:
            return
        mv, ma = _number(r.get("volt")), _number(r.get("curr"))
        rails.append(
            Rail(
                name,
                mw / 1000.0,
                rail_scope(name),
                mv / 1000.0 if mv is not None else None,
                ma / 1000.0 if ma is not None else None,
            )
        )

    for name, r in (power.get("rail") or {}).items():
        if isinstance(r, dict):
            add(str(name), r)
    tot = power.get("tot")
    if isinstance(tot, dict) and tot.get("name"):
        add(str(tot["name"]), tot)
    return rails


class JtopDevice(JetsonDevice):
    """A Jetson read through the jtop service; clocks through sysfs, modes through jtop."""

    def __init__(self, client: Any, module: Any, fs: SysfsRoot, **kwargs: Any) -> None:
        self._client = client
        self._jtop = module
        devfreq, _rails, _nvp, clocks = open_board(fs)
        super().__init__(
            fs,
            devfreq,
            uri="jtop",
            kind="jtop",
            rails=None,
            nvpmodel=None,
            jetson_clocks=clocks,
            **kwargs,
        )
        self._input: Optional[RailSource] = None
        rails = power_rails(_as_dict(self._safe(lambda: client.power)))
        if not any(r.scope == "board input" for r in rails):
            self._input = find_input_rails(fs)  # Thor's INA238, which jetson-stats misses
        name, entry = gpu_entry(_as_dict(self._safe(lambda: client.gpu)))
        temps = _as_dict(self._safe(lambda: client.temperature))
        self._modes = self._read_modes()
        has_power = bool(rails) or self._input is not None
        self.capabilities = Capabilities(
            **dict(
                self.capabilities.to_dict(),
                power=has_power,
                rails=has_power,
                gpu_clock=gpu_clock_mhz(entry) is not None,
                temperature=any(str(k).lower() == "gpu" for k in temps)
                or "temperature" in (entry.get("status") or {}),
                utilisation=_number((entry.get("status") or {}).get("load")) is not None,
                power_mode=bool(self._modes),
            )
        )
        log.debug("jtop: GPU %r, %d rails, modes %s", name, len(rails), self._modes)

    def _safe(self, getter: Any) -> Any:
        try:
            return getter()
        except Exception as err:  # jtop raises its own exception types
            log.debug("jtop: %s", err)
            return None

    def _read_modes(self) -> Tuple[str, ...]:
        model = self._safe(lambda: self._client.nvpmodel)
        models = getattr(model, "models", None) if model is not None else None
        return tuple(str(m) for m in models) if models else ()

    def _call(self, what: str, fn: Any) -> Any:
        error = getattr(self._jtop, "JtopException", None)
        try:
            return fn()
        except Exception as err:
            if error is not None and isinstance(err, error):
                text = " ".join(str(err).split())
                raise TelemetryError(f"jtop: {what} failed: {text}") from err
            raise

    def _read_sample(self) -> Sample:
        c = self._client
        t_s = self.clock.now_s()
        # spin=True: never wait for the next update (ok() alone blocks about one interval)
        if not self._call("reading", lambda: c.ok(spin=True)):
            raise TelemetryError("the jtop service stopped answering")
        rails = power_rails(_as_dict(self._call("reading power", lambda: c.power)))
        if self._input is not None:
            rails.extend(self._input.read())
        best = best_rail(rails)
        _name, entry = gpu_entry(_as_dict(self._call("reading the GPU", lambda: c.gpu)))
        temps = _as_dict(self._call("reading temperatures", lambda: c.temperature))
        return Sample(
            t_s=t_s,
            power_w=best.power_w if best else None,
            power_scope=best.scope if best else None,
            rails=tuple(rails),
            gpu_clock_mhz=gpu_clock_mhz(entry),
            temperature_c=gpu_temperature_c(temps, entry),
            utilisation_pct=_number((entry.get("status") or {}).get("load")),
        )

    def _mode_cap_mhz(self) -> Optional[float]:
        """The GPU cap of the power mode jtop reports, from /etc/nvpmodel.conf: nvpmodel holds
        the GPU below it whatever devfreq lists, so clocks above it are not offered."""
        if self._cap_cache is None:
            cap = None
            if self._modes:
                try:
                    name = self._mode_now()[0]
                except GovernorError as err:
                    log.info("jtop: power mode unknown, GPU cap not applied: %s", err)
                    name = None
                if name:
                    cap = mode_gpu_cap_mhz(self.fs, name)
            self._cap_cache = (cap,)
        return self._cap_cache[0]

    def _mode_now(self) -> Tuple[Optional[str], bool, Any]:
        """(mode name, a switch is running, the per-mode status list) as jtop last reported."""
        model = self._call("reading the power mode", lambda: self._client.nvpmodel)
        if model is None:
            return None, False, None
        running = getattr(model, "is_running", None)
        busy = bool(running()) if callable(running) else False
        return str(getattr(model, "name", model)), busy, getattr(model, "status", None)

    def _read_state(self) -> DeviceState:
        mode = self._mode_now()[0] if self._modes else None
        return DeviceState(gpu_clocks_mhz=self.devfreq.caps_mhz(), power_mode=mode)

    def _write_power_mode(self, mode: str) -> None:
        """Ask jtop for ``mode``, then read the mode back until it shows.

        Raises:
            GovernorError: the mode did not take within :data:`MODE_TIMEOUT_S`.
        """

        def switch() -> None:
            self._client.nvpmodel = mode

        self._call(f"switching to power mode {mode}", switch)
        self._cap_cache = None
        deadline = time.monotonic() + MODE_TIMEOUT_S
        while True:
            name, busy, status = self._mode_now()
            if name == mode and not busy:
                log.info("%s: power mode %s confirmed by jtop", self.uri, mode)
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(MODE_POLL_S)
        index = self._modes.index(mode) if mode in self._modes else -1
        refused = isinstance(status, (list, tuple)) and 0 <= index < len(status)
        why = (
            "jtop marks it unavailable (a mode with another GPU TPC mask needs a reboot, "
            "or nvpmodel failed)"
            if refused and status[index] is False
            else "jtop dropped or did not finish the request"
        )
        raise GovernorError(
            f"power mode {mode} did not take: the board still reports {name or 'no mode'} "
            f"after {MODE_TIMEOUT_S:g} s; {why}"
        )

    def jetson_clocks_enabled(self) -> bool:
        """Whether jetson_clocks (every clock at the mode's maximum) is on."""
        return bool(self._call("reading jetson_clocks", lambda: self._client.jetson_clocks))

    def set_jetson_clocks(self, enabled: bool) -> None:
        """Turn jetson_clocks on or off through the jtop service."""

        def switch() -> None:
            self._client.jetson_clocks = bool(enabled)

        self._call("switching jetson_clocks", switch)

    def _close(self) -> None:
        try:
            self._client.close()
        except Exception as err:  # pragma: no cover
            log.debug("jtop close: %s", err)


def open_jtop(spec: str = "", *, clock: Optional[Clock] = None) -> JtopDevice:
    """Open ``jtop``.

    Raises:
        DeviceNotFoundError: jetson-stats not installed, or its service is not running.
    """
    if spec.strip():
        raise InvalidRequestError(f"the jtop device takes no argument (got {spec!r})")
    try:
        module = _import_jtop()
    except ImportError as err:
        raise DeviceNotFoundError(
            "the jtop backend needs jetson-stats: sudo pip3 install 'gpu-governor[jetson]'"
        ) from err
    client = module.jtop()
    try:
        client.start()
    except Exception as err:
        text = " ".join(str(err).split())
        raise DeviceNotFoundError(
            f"the jtop service is not running ({text}): sudo systemctl restart jtop.service"
        ) from err
    try:
        return JtopDevice(client, module, SysfsRoot(), clock=clock)
    except BaseException:
        client.close()
        raise


def discover_jtop() -> List[str]:
    """``["jtop"]`` when jetson-stats imports and its socket exists, else []."""
    try:
        _import_jtop()
    except ImportError:
        return []
    except Exception as err:  # a broken install
        log.debug("jtop import: %s", err)
        return []
    return ["jtop"] if SysfsRoot().path(SOCKET).exists() else []
