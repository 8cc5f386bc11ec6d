"""The daemon's wire protocol: one JSON object per line over a Unix stream socket.

A request is a JSON object on one line (at most ``max_request_bytes`` bytes, newline
included)::

    {"action": "status"}
    {"action": "apply", "policy": "ppw", "device": "nvml:0"}
    {"action": "lock", "min_mhz": 900, "max_mhz": 1200, "device": "nvml:0"}
    {"action": "reset", "device": "nvml:0"}
    {"action": "cap", "device": "nvml:0", "power_w": 250, "lease_s": 3, "fallback_w": 150}

``cap`` (admins only: the cluster budget service) sets a power limit with a lease; see
:mod:`governor.runtime.daemon.lease`. ``device`` may be left out when the daemon serves one device. ``id`` (a string or integer)
is echoed back. Each request gets one reply line::

    {"ok": true, "action": "apply", "device": "nvml:0", "result": {...}, "id": ...}
    {"ok": false, "code": "not-allowed", "error": "one line for humans", "id": ...}

Error codes: ``bad-json``, ``too-large``, ``bad-request`` (wrong keys, types or ranges),
``unknown-action``, ``not-allowed``, ``unknown-device``, ``out-of-limits``, ``failed`` (the
device refused or failed), ``busy`` (too many clients), ``internal``; and, for a connection
rather than a request, ``timeout`` (the request line did not arrive in time) and
``forbidden`` (the peer is not an allowed user; the connection is closed).

Validation is done by hand against the schema below, so nothing unexpected gets through:
unknown keys, booleans where numbers belong, NaN/infinity and oversized strings are refused.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

from governor._compat import json_loads
from governor.errors import InvalidRequestError

__all__ = [
    "ERROR_CODES",
    "SCHEMA",
    "ProtocolError",
    "Request",
    "decode_reply",
    "decode_request",
    "encode",
    "error_reply",
    "ok_reply",
]

ERROR_CODES = (
    "bad-json",
    "too-large",
    "bad-request",
    "unknown-action",
    "not-allowed",
    "unknown-device",
    "out-of-limits",
    "failed",
    "busy",
    "internal",
    "timeout",
    "forbidden",
)

# action -> {key: (kind, required)}; every request may also carry "action", "device" and "id".
SCHEMA: Dict[str, Dict[str, Tuple[str, bool]]] = {
    "status": {},
    "apply": {"policy": ("policy", True)},
    "lock": {"min_mhz": ("clock", True), "max_mhz": ("clock", False)},
    "reset": {},
    "cap": {
        "power_w": ("watts", True),
        "lease_s": ("seconds", True),
        "fallback_w": ("watts", True),
        "holder": ("text", False),
    },
}
_COMMON = {"action", "device", "id"}
_MAX_STRING = 200
#: upper bounds of the numbers by kind: (unit, largest)
_NUMBERS = {"clock": ("MHz", 100000.0), "watts": ("W", 100000.0), "seconds": ("s", 86400.0)}

IdType = Union[str, int, None]


class ProtocolError(InvalidRequestError):
    """A request the daemon refuses before acting; ``code`` is one of :data:`ERROR_CODES`."""

    def __init__(self, code: str, message: str, request_id: IdType = None) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id


@dataclass(frozen=True)
class Request:
    """A request that passed the schema (not yet the config's allow-list or limits)."""

    action: str
    device: Optional[str] = None
    policy: Optional[str] = None
    min_mhz: Optional[float] = None
    max_mhz: Optional[float] = None
    power_w: Optional[float] = None
    lease_s: Optional[float] = None
    fallback_w: Optional[float] = None
    holder: Optional[str] = None
    id: IdType = None

    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {"action": self.action}
        for key in (
            "device",
            "policy",
            "min_mhz",
            "max_mhz",
            "power_w",
            "lease_s",
            "fallback_w",
            "holder",
            "id",
        ):
            value = getattr(self, key)
            if value is not None:
                doc[key] = value
        return doc


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _string(value: Any, key: str, request_id: IdType) -> str:
    if not isinstance(value, str) or not value or len(value) > _MAX_STRING:
        raise ProtocolError(
            "bad-request",
            f"{key} must be a non-empty string of at most {_MAX_STRING} characters, not {_short(value)}",
            request_id,
        )
    if any(ord(ch) < 32 for ch in value):
        raise ProtocolError("bad-request", f"{key} must not contain control characters", request_id)
    return value


def _number(value: Any, key: str, kind: str, request_id: IdType) -> float:
    unit, largest = _NUMBERS[kind]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(
            "bad-request", f"{key} must be a number ({unit}), not {_short(value)}", request_id
        )
    number = float(value)
    if not math.isfinite(number) or not (0 < number <= largest):
        raise ProtocolError(
            "bad-request",
            f"{key} must be above 0 and at most {largest:g} {unit}, not {_short(value)}",
            request_id,
        )
    return number


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def decode_request(line: bytes, max_bytes: int = 4096) -> Request:
    """Parse and validate one request line (bytes, newline optional).

    Raises:
        ProtocolError: too large, not JSON, not an object, unknown action, bad keys or values.
    """
    if len(line) > max_bytes:
        raise ProtocolError("too-large", f"request is larger than {max_bytes} bytes")
    try:
        text = line.decode("utf-8")
        doc = json_loads(text, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ProtocolError("bad-json", f"request is not valid JSON: {reason}") from None
    if not isinstance(doc, dict):
        raise ProtocolError(
            "bad-json", 'request must be a JSON object such as {"action": "status"}'
        )
    request_id = doc.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int, type(None))):
        raise ProtocolError("bad-request", "id must be a string or an integer")
    if isinstance(request_id, str) and len(request_id) > _MAX_STRING:
        raise ProtocolError("bad-request", f"id must be at most {_MAX_STRING} characters")
    if isinstance(request_id, int) and abs(request_id) > 2**53:
        raise ProtocolError("bad-request", "id is too large")
    if "action" not in doc:
        raise ProtocolError(
            "bad-request", "request has no action; known: " + ", ".join(SCHEMA), request_id
        )
    action = doc["action"]
    if not isinstance(action, str):
        raise ProtocolError(
            "bad-request", f"action must be a string, not {_short(action)}", request_id
        )
    if action not in SCHEMA:
        raise ProtocolError(
            "unknown-action",
            f"unknown action {_short(action)}; known: {', '.join(SCHEMA)}",
            request_id,
        )
    fields = SCHEMA[action]
    unknown = sorted(set(doc) - _COMMON - set(fields))
    if unknown:
        raise ProtocolError(
            "bad-request", f"{action} takes no key {_short(unknown[0])}", request_id
        )
    values: Dict[str, Any] = {}
    for key, (kind, required) in fields.items():
        if key not in doc or doc[key] is None:
            if required:
                raise ProtocolError("bad-request", f"{action} needs {key}", request_id)
            continue
        if kind in _NUMBERS:
            values[key] = _number(doc[key], key, kind, request_id)
        else:
            values[key] = _string(doc[key], key, request_id)
    device = doc.get("device")
    if device is not None:
        device = _string(device, "device", request_id)
    if "min_mhz" in values and "max_mhz" in values and values["min_mhz"] > values["max_mhz"]:
        raise ProtocolError(
            "bad-request",
            f"min_mhz {values['min_mhz']:g} is above max_mhz {values['max_mhz']:g}",
            request_id,
        )
    return Request(action=action, device=device, id=request_id, **values)


def encode(document: Dict[str, Any]) -> bytes:
    """One JSON line (UTF-8, newline-terminated); non-finite floats become null."""
    return (json.dumps(_finite(document), separators=(",", ":"), sort_keys=True) + "\n").encode(
        "utf-8"
    )


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "to_dict"):
        return _finite(value.to_dict())
    return value


def ok_reply(
    request: Request, result: Dict[str, Any], device: Optional[str] = None
) -> Dict[str, Any]:
    reply: Dict[str, Any] = {"ok": True, "action": request.action, "result": result}
    if device is not None:
        reply["device"] = device
    if request.id is not None:
        reply["id"] = request.id
    return reply


def error_reply(code: str, message: str, request_id: IdType = None) -> Dict[str, Any]:
    reply: Dict[str, Any] = {"ok": False, "code": code, "error": " ".join(str(message).split())}
    if request_id is not None:
        reply["id"] = request_id
    return reply


def decode_reply(line: bytes) -> Dict[str, Any]:
    """Parse a reply line from the daemon.

    Raises:
        InvalidRequestError: not a JSON object with ``ok``.
    """
    try:
        doc = json_loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise InvalidRequestError(f"the governor daemon sent an unreadable reply: {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("ok"), bool):
        raise InvalidRequestError("the governor daemon sent a reply without 'ok'")
    return doc
