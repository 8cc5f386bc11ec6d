"""The ROS 2 message definitions governor publishes, shipped so recording needs no ROS install.

Each ``<package>/msg/<Name>.msg`` here states the same fields, in the same order and types,
as the message of that name in ROS 2 (Humble and later); a test compares them with an
installed ROS. :func:`schema_text` gives the ``ros2msg`` schema MCAP files carry: the
message's definition, then each message it uses after a line of ``=`` and ``MSG: pkg/Name``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List

__all__ = ["definition", "schema_text"]

HERE = Path(__file__).resolve().parent
_SEPARATOR = "=" * 80
_PRIMITIVES = {
    "bool",
    "byte",
    "char",
    "float32",
    "float64",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "string",
    "wstring",
}


def _split(datatype: str):
    parts = datatype.split("/")
    if len(parts) == 3 and parts[1] == "msg":
        return parts[0], parts[2]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"not a message type: {datatype!r} (expected pkg/msg/Name)")


def definition(datatype: str) -> str:
    """The text of ``pkg/msg/Name`` (or ``pkg/Name``) as shipped.

    Raises:
        ValueError: no such definition is shipped.
    """
    package, name = _split(datatype)
    path = HERE / package / "msg" / f"{name}.msg"
    if not path.is_file():
        raise ValueError(f"no message definition shipped for {datatype}")
    return path.read_text(encoding="utf-8")


def _dependencies(package: str, text: str) -> List[str]:
    """``pkg/Name`` of each message type the definition's fields use, in order."""
    out: List[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        ftype = line.split()[0]
        base = re.sub(r"\[.*\]$", "", ftype).split("<=")[0]  # arrays, bounded strings
        if base in _PRIMITIVES:  # constants are always primitive
            continue
        full = base if "/" in base else f"{package}/{base}"
        if full not in out:
            out.append(full)
    return out


def schema_text(datatype: str) -> str:
    """The ``ros2msg`` schema of ``pkg/msg/Name``: its definition and those it uses."""
    package, name = _split(datatype)
    parts = [definition(datatype).strip()]
    seen = [f"{package}/{name}"]
    queue = _dependencies(package, parts[0])
    while queue:
        dep = queue.pop(0)
        if dep in seen:
            continue
        seen.append(dep)
        dep_pkg, _ = _split(dep)
        text = definition(dep).strip()
        parts.append(f"{_SEPARATOR}\nMSG: {dep}\n{text}")
        queue.extend(_dependencies(dep_pkg, text))
    return "\n".join(parts) + "\n"
