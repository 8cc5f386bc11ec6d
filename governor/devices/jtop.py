"""The ``jtop`` device: telemetry from the jetson-stats service, without root.

jetson-stats (extra ``jetson``) is AGPL-3.0: governor only imports it, optionally, and copies
nothing. Its service (``jtop.service``, socket ``/run/jtop.sock``) reads the board as root and
serves clients, so telemetry works for any user. Power modes and jetson_clocks are switched
through jtop (the service does it); GPU clocks are locked through the sysfs code of the
``jetson`` backend, which needs root.

Fields read from a jtop client (jetson-stats 4.x): ``power["rail"][NAME]["power"]`` (mW),
``["volt"]`` (mV), ``["curr"]`` (mA); ``gpu["gpu"]["status"]["load"]`` (%),
``gpu["gpu"]["freq"]["cur"]`` (kHz); ``temperature["gpu"]["temp"]`` (°C);
``nvpmodel.name`` / ``nvpmodel.models``; ``jetson_clocks`` (truthy, settable).
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional, Tuple

from governor.devices.base import Capabilities, DeviceState, Rail, Sample
from governor.devices.jetson.device import JetsonDevice, open_board
from governor.devices.jetson.rails import best_rail, rail_scope
from governor.devices.jetson.sysfs import SysfsRoot
from governor.devices.journal import Journal
from governor.errors import DeviceNotFoundError, InvalidRequestError, TelemetryError
from governor.timebase import Clock

__all__ = ["JtopDevice", "discover_jtop", "open_jtop"]

log = logging.getLogger("governor.devices.jtop")

SOCKET = "/run/jtop.sock"


def _import_jtop() -> Any:
    """The ``jtop`` module of jetson-stats. Tests replace this function with a fake module."""
    import jtop

    return jtop


def _number(value: Any) -> Optional[float]:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


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
        power = self._safe(lambda: client.power) or {}
        rails = bool((power or {}).get("rail"))
        self._modes = self._read_modes()
        self.capabilities = Capabilities(
            **dict(
                self.capabilities.to_dict(), power=rails, rails=rails, power_mode=bool(self._modes)
            )
        )

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
                raise TelemetryError(f"jtop: {what} failed: {err}") from err
            raise

    def _read_sample(self) -> Sample:
        c = self._client
        t_s = self.clock.now_s()
        if not self._call("reading", c.ok):
            raise TelemetryError("the jtop service stopped answering")
        rails: List[Rail] = []
        for name, r in (self._call("reading power", lambda: c.power) or {}).get("rail", {}).items():
            mw = _number(r.get("power"))
            if mw is None or r.get("online") is False:
                continue
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
        best = best_rail(rails)
        gpu = (self._call("reading the GPU", lambda: c.gpu) or {}).get("gpu") or {}
        load = _number((gpu.get("status") or {}).get("load"))
        khz = _number((gpu.get("freq") or {}).get("cur"))
        temp = _number(
            (
                (self._call("reading temperatures", lambda: c.temperature) or {}).get("gpu") or {}
            ).get("temp")
        )
        return Sample(
            t_s=t_s,
            power_w=best.power_w if best else None,
            power_scope=best.scope if best else None,
            rails=tuple(rails),
            gpu_clock_mhz=khz / 1000.0 if khz is not None else None,
            temperature_c=temp,
            utilisation_pct=load,
        )

    def _read_state(self) -> DeviceState:
        mode = None
        if self._modes:
            model = self._call("reading the power mode", lambda: self._client.nvpmodel)
            mode = str(getattr(model, "name", model))
        return DeviceState(gpu_clocks_mhz=self.devfreq.caps_mhz(), power_mode=mode)

    def _write_power_mode(self, mode: str) -> None:
        def switch() -> None:
            self._client.nvpmodel = mode

        self._call(f"switching to power mode {mode}", switch)

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


def open_jtop(
    spec: str = "", *, clock: Optional[Clock] = None, journal: Optional[Journal] = None
) -> JtopDevice:
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
            "the jtop backend needs jetson-stats: sudo pip3 install 'governor[jetson]'"
        ) from err
    client = module.jtop()
    try:
        client.start()
    except Exception as err:
        raise DeviceNotFoundError(
            f"the jtop service is not running ({err}): sudo systemctl restart jtop.service"
        ) from err
    try:
        return JtopDevice(client, module, SysfsRoot(), clock=clock, journal=journal)
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
