"""A stand-in for the jetson-stats client that serves the structures recorded in
``tests/data/jtop/`` (see its README for the source of each shape).

Only the client's surface is imitated (attribute names, what assigning them does, which call
blocks); every dictionary it returns comes from a recorded file, so the backend is tested
against jetson-stats' shapes, not against our idea of them. jetson-stats is AGPL: nothing here
is its code.
"""

from __future__ import annotations

import copy
import datetime
import json
import types
from pathlib import Path
from typing import Any, Dict, List, Optional

DATA = Path(__file__).resolve().parents[1] / "data" / "jtop"
BOARDS = ("nano-jp4", "xavier-jp5", "orin-jp5", "orin-jp6", "thor-jp7")


def record(board: str) -> Dict[str, Any]:
    """The recorded structures of ``board`` (a fresh copy each call)."""
    return json.loads((DATA / f"{board}.json").read_text())


class JtopException(Exception):
    """jetson-stats' own exception type (``jtop.JtopException``)."""


class GPU:
    """``jetson.gpu``: readable like a dict (jetson-stats' GenericInterface)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self._data = data

    def items(self):
        return self._data.items()

    def keys(self):
        return self._data.keys()

    def values(self):
        return self._data.values()

    def get(self, key, default=None):
        return self._data.get(key, default)

    def __getitem__(self, key):
        return self._data[key]

    def __contains__(self, key):
        return key in self._data

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


class NVPModel:
    """``jetson.nvpmodel``: the current mode as last reported by the service."""

    def __init__(self, init: Dict[str, Any], status: Dict[str, Any]) -> None:
        self._models = list(init["models"])
        self._default = init["default"]
        self._update(status)

    def _update(self, status: Dict[str, Any]) -> None:
        self._status = list(status["status"])
        self._running = status["thread"]
        self._now = dict(status["model"])

    @property
    def name(self) -> str:
        return self._now["name"]

    @property
    def id(self) -> int:
        return self._now["id"]

    @property
    def models(self) -> List[str]:
        return self._models

    @property
    def status(self) -> List[bool]:
        return self._status

    def is_running(self) -> bool:
        return self._running

    def get_default(self) -> Dict[str, Any]:
        return self._default

    def __repr__(self) -> str:
        return self._now["name"]


class JetsonClocks:
    """``jetson.jetson_clocks``: truthy when enabled."""

    def __init__(self, status: Dict[str, Any]) -> None:
        self._status = status

    def __bool__(self) -> bool:
        return bool(self._status["enable"])


def make_module(board: str, *, running: bool = True, mode_policy: str = "apply") -> Any:
    """A module like ``jtop`` whose client serves ``board``'s recorded structures.

    ``mode_policy`` says what the service does with a power-mode request on its next update:
    ``apply`` switches, ``drop`` ignores it (as 4.3.x does for another TPC mask, or any version
    when a switch is already running), ``fail`` marks the mode failed (``status[id] = False``,
    as when ``nvpmodel -m`` prints NVPM ERROR).
    """
    mod = types.ModuleType("fake_jtop")
    mod.JtopException = JtopException
    mod.clients = []
    mod.board = board

    class jtop:  # noqa: N801 - the real class name
        def __init__(self, interval: float = 1.0) -> None:
            self.data = record(board)
            self.interval = interval
            self.alive = True
            self.closed = False
            self.ok_calls: List[bool] = []
            self.requests: List[Any] = []
            self.updates = 0
            self._pending: Optional[str] = None
            self._nvp = NVPModel(self.data["nvpmodel"]["init"], self.data["nvpmodel"]["status"])
            mod.clients.append(self)

        # -- lifecycle ---------------------------------------------------------------
        def start(self) -> None:
            if not running:
                raise JtopException(
                    "The jtop.service is not active. Please run:\nsudo systemctl restart jtop.service"
                )

        def close(self) -> None:
            self.closed = True

        def ok(self, spin: bool = False) -> bool:
            """The real one waits for the next update unless ``spin``; here a blocking call
            is recorded (and the service moves on one update, as it would have)."""
            self.ok_calls.append(spin)
            if not self.alive:
                raise JtopException("Lost connection with jtop server")
            if not spin:
                self.update()
            return True

        # -- the service's next update -------------------------------------------------
        def update(self) -> None:
            self.updates += 1
            if self._pending is None:
                return
            name, self._pending = self._pending, None
            status = copy.deepcopy(self.data["nvpmodel"]["status"])
            index = self._nvp.models.index(name)
            if mode_policy == "apply":
                status["model"] = {"name": name, "id": index}
            elif mode_policy == "fail":
                status["model"] = dict(self._nvp._now)
                status["status"][index] = False
            else:
                status["model"] = dict(self._nvp._now)
            self.data["nvpmodel"]["status"] = status
            self._nvp._update(status)

        # -- properties (the latest stats, never waiting) ----------------------------
        @property
        def gpu(self) -> GPU:
            return GPU(self.data["gpu"])

        @property
        def power(self) -> Dict[str, Any]:
            return self.data["power"]

        @property
        def temperature(self) -> Dict[str, Any]:
            return self.data["temperature"]

        @property
        def nvpmodel(self) -> NVPModel:
            self.update()  # the service thread keeps running while the client polls
            return self._nvp

        @nvpmodel.setter
        def nvpmodel(self, value: Any) -> None:
            if value not in self._nvp.models:
                raise JtopException(f'NV Power Model "{value}" does not exists!')
            self.requests.append(value)
            if value != self._nvp.name:  # the real client skips the current mode
                self._pending = value

        @property
        def jetson_clocks(self) -> JetsonClocks:
            return JetsonClocks(self.data["jetson_clocks"])

        @jetson_clocks.setter
        def jetson_clocks(self, value: bool) -> None:
            self.data["jetson_clocks"]["enable"] = bool(value)

        @property
        def stats(self) -> Dict[str, Any]:
            stats = dict(self.data["stats"])
            stats["time"] = datetime.datetime.fromisoformat(stats["time"])
            stats["uptime"] = datetime.timedelta(seconds=stats["uptime"])
            return stats

    mod.jtop = jtop
    return mod
