"""The daemon's configuration file (TOML), parsed once and validated to one-line errors.

Example (``deploy/governor-daemon.toml`` is the commented version)::

    [daemon]
    socket = "/run/governor/governor.sock"   # Unix socket clients connect to
    socket_group = "governor"                # group that may connect (mode 0660)
    admin_group = "gpuadmin"                 # may change any device (else: own job's GPUs)
    job_records = "/var/lib/governor/jobs"   # the Slurm prolog's records (GOVERNOR_RECORD_DIR)
    allow = ["status", "apply", "lock", "reset"]
    allow_policies = ["ppw", "max"]          # what "apply" may ask for
    interval_s = 0.5                         # control loop period of enforced policies
    max_connections = 256                    # open connections at most (the slowest evicted)
    request_timeout_s = 2.0                  # a whole request line must arrive within this
    idle_timeout_s = 10.0                    # a silent connection between requests is closed
    workers = 4                              # threads that carry out requests

    [policy]                                 # enforced on every device (optional)
    policy = "power-cap"
    cap_w = 200.0

    [[device]]
    uri = "nvml:0"
    min_mhz = 600.0                          # clients may lock only within these
    max_mhz = 1410.0

    [device.policy]                          # this device's own policy (optional)
    policy = "ppw"

Every error names the file and the key (``daemon.toml: device[0].min_mhz: ...``).
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from governor._compat import toml_loads
from governor.errors import InvalidRequestError
from governor.runtime import policies as _policies

__all__ = [
    "ACTIONS",
    "CLIENT_POLICIES",
    "POLICIES",
    "ConfigError",
    "DaemonConfig",
    "DeviceConfig",
    "check_may_start",
    "load_config",
    "parse_config",
]

#: every action the protocol knows; a config's allow-list is a subset
ACTIONS = ("status", "apply", "lock", "reset", "cap")  # cap: admins only (lease.py)
#: profile policies a client may ask for with "apply" (from the policy table)
CLIENT_POLICIES = _policies.CLIENT_POLICIES
#: the numbers each policy the daemon may enforce takes, all required ("none": leave the
#: device alone), from the policy table's ``numbers``
_POLICY_NEEDS: Dict[str, Tuple[str, ...]] = {"none": ()}
_POLICY_NEEDS.update(
    (name, kind.numbers) for name, kind in _policies.POLICIES.items() if kind.numbers is not None
)
#: policies the daemon may enforce from its config
POLICIES = tuple(_POLICY_NEEDS)
#: numeric policy parameters (runtime contract), each > 0
_POLICY_NUMBERS = tuple(dict.fromkeys(key for keys in _POLICY_NEEDS.values() for key in keys))
_DEFAULT_SOCKET = "/run/governor/governor.sock"
_MAX_REQUEST_BYTES = (256, 65536)
_MAX_CONNECTIONS = (1, 4096)
_WORKERS = (1, 64)
#: older names of daemon keys, still read: old name -> new name
_RENAMED = {"max_clients": "max_connections", "client_timeout_s": "idle_timeout_s"}


class ConfigError(InvalidRequestError):
    """The daemon's config file is unreadable or invalid; the message names file and key."""


@dataclass(frozen=True)
class DeviceConfig:
    """One configured device: its URI, the clock limits clients must stay within (MHz;
    None: the device's own range) and the policy the daemon enforces on it."""

    uri: str
    min_mhz: Optional[float] = None
    max_mhz: Optional[float] = None
    policy: Dict[str, Any] = field(default_factory=lambda: {"policy": "none"})

    def to_dict(self) -> Dict[str, Any]:
        return {
            "uri": self.uri,
            "min_mhz": self.min_mhz,
            "max_mhz": self.max_mhz,
            "policy": dict(self.policy),
        }


@dataclass(frozen=True)
class DaemonConfig:
    """The validated contents of a daemon config file."""

    devices: Tuple[DeviceConfig, ...]
    socket: Path = Path(_DEFAULT_SOCKET)
    socket_group: Optional[str] = None
    socket_mode: int = 0o660
    allow: Tuple[str, ...] = ACTIONS
    allow_policies: Tuple[str, ...] = CLIENT_POLICIES
    interval_s: float = 0.5
    max_request_bytes: int = 4096
    max_connections: int = 256
    request_timeout_s: float = 2.0
    idle_timeout_s: float = 10.0
    workers: int = 4
    test_mode: bool = False
    source: str = "<config>"
    metrics_listen: Optional[str] = None  # ADDR:PORT of Prometheus metrics, None: off
    admin_group: Optional[str] = None  # members may change any device (see jobs.py)
    job_records: Path = Path("/var/lib/governor/jobs")  # the Slurm prolog's job records

    def device(self, uri: str) -> Optional[DeviceConfig]:
        for dev in self.devices:
            if dev.uri == uri:
                return dev
        return None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "socket": str(self.socket),
            "socket_group": self.socket_group,
            "socket_mode": oct(self.socket_mode),
            "allow": list(self.allow),
            "allow_policies": list(self.allow_policies),
            "interval_s": self.interval_s,
            "max_request_bytes": self.max_request_bytes,
            "max_connections": self.max_connections,
            "request_timeout_s": self.request_timeout_s,
            "idle_timeout_s": self.idle_timeout_s,
            "workers": self.workers,
            "devices": [d.to_dict() for d in self.devices],
            "test_mode": self.test_mode,
            "metrics_listen": self.metrics_listen,
            "admin_group": self.admin_group,
            "job_records": str(self.job_records),
        }


# -- checking values ---------------------------------------------------------------------------
class _Checker:
    """Reads typed values out of parsed TOML; every failure names the file and key."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {key}: {message}")

    def table(
        self, doc: Dict[str, Any], key: str, where: str, known: Tuple[str, ...]
    ) -> Dict[str, Any]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(where, "must be a table")
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise self.fail(
                f"{where}.{unknown[0]}", f"unknown key; known keys are {', '.join(known)}"
            )
        return value

    def string(
        self, table: Dict[str, Any], key: str, where: str, default: Optional[str]
    ) -> Optional[str]:
        value = table.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"{where}.{key}", f"must be a non-empty string, not {value!r}")
        return value.strip()

    def number(
        self,
        table: Dict[str, Any],
        key: str,
        where: str,
        default: Optional[float],
        lo: float = 0.0,
        hi: float = math.inf,
    ) -> Optional[float]:
        value = table.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"{where}.{key}", f"must be a number, not {value!r}")
        number = float(value)
        if not math.isfinite(number) or number <= lo or number > hi:
            bound = f"above {lo:g}" + (f" and at most {hi:g}" if math.isfinite(hi) else "")
            raise self.fail(f"{where}.{key}", f"must be {bound}, not {value!r}")
        return number

    def integer(
        self, table: Dict[str, Any], key: str, where: str, default: int, bounds: Tuple[int, int]
    ) -> int:
        value = table.get(key, default)
        lo, hi = bounds
        if isinstance(value, bool) or not isinstance(value, int) or not (lo <= value <= hi):
            raise self.fail(
                f"{where}.{key}", f"must be an integer from {lo} to {hi}, not {value!r}"
            )
        return value

    def boolean(self, table: Dict[str, Any], key: str, where: str, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(f"{where}.{key}", f"must be true or false, not {value!r}")
        return value

    def choices(
        self,
        table: Dict[str, Any],
        key: str,
        where: str,
        known: Tuple[str, ...],
        default: Tuple[str, ...],
    ) -> Tuple[str, ...]:
        value = table.get(key, list(default))
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{where}.{key}", f"must be a list of strings, not {value!r}")
        for item in value:
            if item not in known:
                raise self.fail(
                    f"{where}.{key}", f"unknown entry {item!r}; known: {', '.join(known)}"
                )
        return tuple(dict.fromkeys(value))

    def policy(self, value: Any, where: str) -> Dict[str, Any]:
        if isinstance(value, str):
            value = {"policy": value}
        if not isinstance(value, dict):
            raise self.fail(where, 'must be a table such as { policy = "ppw" }')
        unknown = sorted(set(value) - {"policy", *_POLICY_NUMBERS})
        if unknown:
            raise self.fail(
                f"{where}.{unknown[0]}",
                f"unknown key; known keys are policy, {', '.join(_POLICY_NUMBERS)}",
            )
        name = value.get("policy", "none")
        if name not in POLICIES:
            raise self.fail(
                f"{where}.policy", f"unknown policy {name!r}; known: {', '.join(POLICIES)}"
            )
        spec: Dict[str, Any] = {"policy": name}
        for key in _POLICY_NUMBERS:
            number = self.number(value, key, where, None)
            if number is not None:
                spec[key] = number
        needs = _POLICY_NEEDS.get(name, ())
        for key in needs:
            if key not in spec:
                raise self.fail(f"{where}.{key}", f"the {name} policy needs {key}")
        for key in spec:
            if key != "policy" and key not in needs:
                raise self.fail(f"{where}.{key}", f"the {name} policy takes no {key}")
        if name != "none":
            self.check_with_runtime(spec, where)
        return spec

    def check_with_runtime(self, spec: Dict[str, Any], where: str) -> None:
        """Let the runtime's own policy parser judge the spec too."""
        try:
            _policies.from_spec(spec)
        except InvalidRequestError as err:
            raise self.fail(where, str(err)) from None


def _under_temp_dir(path: Path) -> bool:
    temp = Path(tempfile.gettempdir()).resolve()
    try:
        Path(os.path.abspath(path)).resolve().relative_to(temp)
    except ValueError:
        return False
    return True


# -- parsing -----------------------------------------------------------------------------------
_DAEMON_KEYS = (
    "socket",
    "socket_group",
    "socket_mode",
    "allow",
    "allow_policies",
    "interval_s",
    "max_request_bytes",
    "max_connections",
    "request_timeout_s",
    "idle_timeout_s",
    "workers",
    "test_mode",
    "metrics_listen",
    "admin_group",
    "job_records",
    *_RENAMED,
)
_DEVICE_KEYS = ("uri", "min_mhz", "max_mhz", "policy")


def parse_config(text: str, source: str = "<config>") -> DaemonConfig:
    """Validate TOML ``text`` (from file ``source``) into a :class:`DaemonConfig`.

    Keys are checked in a fixed order (the daemon table, the policy, the devices, then the
    remaining daemon keys), so a file with several mistakes always reports the same first one.

    Raises:
        ConfigError: invalid TOML or values; the message names ``source`` and the key.
    """
    check = _Checker(source)
    try:
        doc = toml_loads(text)
    except ValueError as err:
        raise ConfigError(f"{source}: invalid TOML: {err}") from None
    unknown = sorted(set(doc) - {"daemon", "policy", "device"})
    if unknown:
        raise check.fail(unknown[0], "unknown section; known: daemon, policy, device")
    daemon = check.table(doc, "daemon", "daemon", _DAEMON_KEYS)
    spelled = _spelled_names(check, daemon)
    socket = _socket_path(check, daemon)
    socket_mode = _socket_mode(check, daemon)
    max_bytes = _max_request_bytes(check, daemon)
    request_timeout_s = float(
        check.number(daemon, "request_timeout_s", "daemon", 2.0, 0.0, 60.0) or 2.0
    )
    idle_timeout_s = float(
        check.number(daemon, spelled["idle_timeout_s"], "daemon", 10.0, 0.0, 3600.0) or 10.0
    )
    site_policy = check.policy(doc.get("policy", {"policy": "none"}), "policy")
    devices = _devices(check, doc.get("device", []), site_policy)
    metrics_listen = _metrics_listen(check, daemon)
    test_mode = check.boolean(daemon, "test_mode", "daemon", False)
    if test_mode and not _under_temp_dir(socket):
        raise check.fail(
            "daemon.test_mode",
            f"test mode needs a socket under the temporary directory {tempfile.gettempdir()}",
        )
    return DaemonConfig(
        devices=tuple(devices),
        socket=socket,
        socket_group=check.string(daemon, "socket_group", "daemon", None),
        socket_mode=socket_mode,
        allow=check.choices(daemon, "allow", "daemon", ACTIONS, ACTIONS),
        allow_policies=check.choices(
            daemon, "allow_policies", "daemon", CLIENT_POLICIES, CLIENT_POLICIES
        ),
        interval_s=float(check.number(daemon, "interval_s", "daemon", 0.5, 0.0, 60.0) or 0.5),
        max_request_bytes=max_bytes,
        max_connections=check.integer(
            daemon, spelled["max_connections"], "daemon", 256, _MAX_CONNECTIONS
        ),
        request_timeout_s=request_timeout_s,
        idle_timeout_s=idle_timeout_s,
        workers=check.integer(daemon, "workers", "daemon", 4, _WORKERS),
        test_mode=test_mode,
        source=source,
        metrics_listen=metrics_listen,
        admin_group=check.string(daemon, "admin_group", "daemon", None),
        job_records=_job_records(check, daemon),
    )


def _job_records(check: _Checker, daemon: Dict[str, Any]) -> Path:
    text = check.string(daemon, "job_records", "daemon", "/var/lib/governor/jobs")
    path = Path(text or "/var/lib/governor/jobs")
    if not path.is_absolute():
        raise check.fail("daemon.job_records", f"must be an absolute path, not {text!r}")
    return path


def _spelled_names(check: _Checker, daemon: Dict[str, Any]) -> Dict[str, str]:
    """New key name -> the name the file uses for it (an old name is still read; giving both
    is an error)."""
    spelled = {new: new for new in _RENAMED.values()}
    for old, new in _RENAMED.items():
        if old in daemon:
            if new in daemon:
                raise check.fail(f"daemon.{old}", f"is the old name of {new}; give only {new}")
            spelled[new] = old
    return spelled


def _socket_path(check: _Checker, daemon: Dict[str, Any]) -> Path:
    """``daemon.socket``: an absolute path short enough for a Unix socket address."""
    socket_text = check.string(daemon, "socket", "daemon", _DEFAULT_SOCKET)
    socket = Path(str(socket_text))
    if not socket.is_absolute():
        raise check.fail("daemon.socket", f"must be an absolute path, not {socket_text!r}")
    if len(os.fsencode(str(socket))) > 100:
        raise check.fail("daemon.socket", "path is too long for a Unix socket (100 bytes at most)")
    return socket


def _socket_mode(check: _Checker, daemon: Dict[str, Any]) -> int:
    """``daemon.socket_mode``: an octal string granting at most 0660."""
    mode = daemon.get("socket_mode", "0660")
    try:
        socket_mode = int(mode, 8) if isinstance(mode, str) else -1
    except ValueError:
        socket_mode = -1
    if socket_mode < 0 or socket_mode & ~0o660:
        raise check.fail(
            "daemon.socket_mode", f"must be an octal string granting at most 0660, not {mode!r}"
        )
    return socket_mode


def _max_request_bytes(check: _Checker, daemon: Dict[str, Any]) -> int:
    """``daemon.max_request_bytes``: an integer within ``_MAX_REQUEST_BYTES``."""
    max_bytes = daemon.get("max_request_bytes", 4096)
    if (
        isinstance(max_bytes, bool)
        or not isinstance(max_bytes, int)
        or not (_MAX_REQUEST_BYTES[0] <= max_bytes <= _MAX_REQUEST_BYTES[1])
    ):
        raise check.fail(
            "daemon.max_request_bytes",
            f"must be an integer from {_MAX_REQUEST_BYTES[0]} to {_MAX_REQUEST_BYTES[1]}, not {max_bytes!r}",
        )
    return max_bytes


def _devices(check: _Checker, raw_devices: Any, site_policy: Dict[str, Any]) -> List[DeviceConfig]:
    """The ``[[device]]`` tables, at least one; a device without its own policy gets the
    site's."""
    if not isinstance(raw_devices, list) or not raw_devices:
        raise check.fail("device", "at least one [[device]] table with a uri is required")
    devices: List[DeviceConfig] = []
    for i, raw in enumerate(raw_devices):
        devices.append(_device(check, raw, f"device[{i}]", devices, site_policy))
    return devices


def _device(
    check: _Checker,
    raw: Any,
    where: str,
    before: List[DeviceConfig],
    site_policy: Dict[str, Any],
) -> DeviceConfig:
    """One ``[[device]]`` table (``where`` names it in errors); ``before`` are the devices
    listed above it, whose URIs it must not repeat."""
    if not isinstance(raw, dict):
        raise check.fail(where, "must be a table")
    unknown = sorted(set(raw) - set(_DEVICE_KEYS))
    if unknown:
        raise check.fail(
            f"{where}.{unknown[0]}", "unknown key; known keys are uri, min_mhz, max_mhz, policy"
        )
    uri = check.string(raw, "uri", where, None)
    if uri is None:
        raise check.fail(f"{where}.uri", "is required (e.g. nvml:0, jetson, sim:agx-orin)")
    if uri == "auto":
        raise check.fail(f"{where}.uri", "must name a device, not auto")
    if any(d.uri == uri for d in before):
        raise check.fail(f"{where}.uri", f"{uri!r} is listed twice")
    lo = check.number(raw, "min_mhz", where, None)
    hi = check.number(raw, "max_mhz", where, None)
    if lo is not None and hi is not None and lo > hi:
        raise check.fail(f"{where}.min_mhz", f"{lo:g} is above max_mhz {hi:g}")
    policy = check.policy(raw["policy"], f"{where}.policy") if "policy" in raw else site_policy
    return DeviceConfig(uri=uri, min_mhz=lo, max_mhz=hi, policy=policy)


def _metrics_listen(check: _Checker, daemon: Dict[str, Any]) -> Optional[str]:
    """``daemon.metrics_listen``: None, or an address the exporter can parse."""
    metrics_listen = check.string(daemon, "metrics_listen", "daemon", None)
    if metrics_listen is not None:
        from governor.runtime.exporter import parse_listen

        try:
            parse_listen(metrics_listen)
        except ValueError as err:
            raise check.fail("daemon.metrics_listen", str(err)) from None
    return metrics_listen


def load_config(path: Any) -> DaemonConfig:
    """Read and validate the config file at ``path``.

    Raises:
        ConfigError: unreadable file or invalid contents (one line naming file and key).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ConfigError(f"{file}: cannot read the daemon config: {reason}") from None
    return parse_config(text, str(file))


def check_may_start(
    config: DaemonConfig, *, euid: Optional[int] = None, test_mode: bool = False
) -> None:
    """Refuse to start as a non-root user unless in test mode with a socket under the temp dir.

    Raises:
        DevicePermissionError: not root and no test mode; ConfigError: test mode elsewhere.
    """
    from governor.errors import DevicePermissionError

    if euid is None:
        geteuid = getattr(os, "geteuid", None)
        euid = geteuid() if geteuid is not None else -1
    if euid == 0:
        return
    if not (test_mode or config.test_mode):
        raise DevicePermissionError(
            "the governor daemon must run as root (it changes GPU clocks for other users); "
            "start it with sudo or the systemd unit, or use --test-mode with a socket under "
            f"{tempfile.gettempdir()}"
        )
    if not _under_temp_dir(config.socket):
        raise ConfigError(
            f"{config.source}: daemon.socket: test mode needs a socket under the temporary "
            f"directory {tempfile.gettempdir()}, not {config.socket}"
        )
