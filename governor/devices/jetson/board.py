"""Which Jetson this is: the catalog name from the device tree (or the GPU clock table), and the
L4T release from ``/etc/nv_tegra_release``, all read under the sysfs root."""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

from governor.devices.jetson.sysfs import SysfsRoot

__all__ = ["identify_board", "l4t_version"]

# device-tree ``model`` text -> catalog name; first match wins (so "Orin Nano" beats "Nano").
_MODEL_PATTERNS = (
    (r"thor", "thor"),
    (r"agx[ -]?orin|p3701|p3737", "agx-orin"),
    (r"orin[ -]?nx", "orin-nx"),
    (r"orin[ -]?nano", "orin-nano"),
    (r"xavier[ -]?nx|p3668", "xavier-nx"),
    (r"agx[ -]?xavier|jetson-agx|p2888|p2972", "agx-xavier"),
    (r"tx2|quill|p3310|p3489", "tx2"),
    (r"\bnano\b|p3448|p3450|p3541", "nano"),
)
# SoC in ``compatible`` -> catalog name when the model text says nothing more
_SOC = (
    ("tegra264", "thor"),
    ("tegra234", "agx-orin"),
    ("tegra194", "agx-xavier"),
    ("tegra186", "tx2"),
    ("tegra210", "nano"),
)
# Orin modules by part number in ``compatible`` (p3767-0000/0001 NX, -0003/4/5 Nano)
_ORIN_PARTS = (
    ("p3767-0000", "orin-nx"),
    ("p3767-0001", "orin-nx"),
    ("p3767-000", "orin-nano"),
    ("p3701", "agx-orin"),
)
# (lowest MHz, highest MHz) of the GPU table -> catalog name (boards.md; the TX2's L4T R28
# table starts at 140.25 MHz, tests/data/sysfs/README.md)
_TABLES = (
    ((76.8, 921.6), "nano"),
    ((114.75, 1300.5), "tx2"),
    ((140.25, 1300.5), "tx2"),
    ((114.75, 1109.25), "xavier-nx"),
    ((114.75, 1377.0), "agx-xavier"),
    ((306.0, 1300.5), "agx-orin"),
    ((306.0, 918.0), "orin-nx"),
    ((306.0, 624.75), "orin-nano"),
    ((306.0, 1020.0), "orin-nano"),
)


def _device_tree(fs: SysfsRoot, name: str) -> str:
    for base in ("/proc/device-tree", "/sys/firmware/devicetree/base"):
        text = fs.read_optional(fs.path(f"{base}/{name}"))
        if text:
            return text.replace("\x00", " ").strip()
    return ""


def identify_board(fs: SysfsRoot, clocks_mhz: Sequence[float] = ()) -> Tuple[str, str]:
    """(catalog name, display name) of the board; catalog name "jetson" when unknown."""
    model = _device_tree(fs, "model")
    compatible = _device_tree(fs, "compatible").lower()
    display = model or "NVIDIA Jetson"
    for pattern, name in _MODEL_PATTERNS:
        if re.search(pattern, model, re.IGNORECASE):
            return name, display
    if "tegra234" in compatible:
        for part, name in _ORIN_PARTS:
            if part in compatible:
                return name, display
    for pattern, name in _MODEL_PATTERNS:
        if re.search(pattern, compatible):
            return name, display
    if clocks_mhz:
        span = (min(clocks_mhz), max(clocks_mhz))
        for (lo, hi), name in _TABLES:
            if abs(span[0] - lo) < 0.5 and abs(span[1] - hi) < 0.5:
                return name, display
    for soc, name in _SOC:
        if soc in compatible:
            return name, display
    return "jetson", display


def l4t_version(fs: SysfsRoot) -> Optional[str]:
    """``32.7.1`` from ``# R32 (release), REVISION: 7.1, ...`` in /etc/nv_tegra_release."""
    text = fs.read_optional(fs.path("/etc/nv_tegra_release"))
    if not text:
        return None
    match = re.search(r"R(\d+)\s*\(\w+\),\s*REVISION:\s*([\d.]+)", text)
    if not match:
        return None
    return f"{match.group(1)}.{match.group(2).rstrip('.')}"
