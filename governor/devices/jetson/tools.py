"""``nvpmodel`` and ``jetson_clocks``, found on PATH and run with argument lists (never a shell).

- ``nvpmodel -q`` prints ``NV Power Mode: <NAME>`` then the mode id; ``nvpmodel -m <id>``
  switches (some switches need a reboot; nvpmodel then asks, and gets no answer from us);
  the modes are the ``< POWER_MODEL ID=<n> NAME=<NAME> >`` lines of ``/etc/nvpmodel.conf``
  (read under the sysfs root), or ``NVPM VERB: POWER_MODEL: ID=.. NAME=..`` lines of
  ``nvpmodel -q --verbose``.
- ``jetson_clocks --store FILE`` / ``--restore FILE`` save and restore every clock.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from governor.devices.jetson.sysfs import SysfsRoot
from governor.errors import DevicePermissionError, GovernorError, UnsupportedError

__all__ = ["JetsonClocks", "Nvpmodel", "find_tool"]

_TIMEOUT_S = 30.0
_MODE_LINE = re.compile(r"POWER_MODEL:?\s+ID\s*=\s*(\d+)\s+NAME\s*=\s*([^\s>]+)")


def find_tool(name: str) -> Optional[str]:
    """The executable ``name`` on PATH, or None."""
    return shutil.which(name)


def _is_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return bool(geteuid and geteuid() == 0)


def _run(argv: Sequence[str], doing: str) -> str:
    """Run a tool; its stdout. Failures become our errors (permission when not root)."""
    try:
        proc = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as err:
        raise UnsupportedError(f"{argv[0]} is not installed: cannot {doing}") from err
    except PermissionError as err:
        raise DevicePermissionError(f"cannot run {argv[0]}: {err}") from err
    except subprocess.TimeoutExpired as err:
        raise GovernorError(
            f"{argv[0]} did not answer within {_TIMEOUT_S:g} s while trying to {doing}"
        ) from err
    out = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        err_text = (proc.stderr.decode(errors="replace") + out).strip()
        last = err_text.splitlines()[-1] if err_text else f"exit status {proc.returncode}"
        if not _is_root() or re.search(
            r"permission|not permitted|root|sudo", err_text, re.IGNORECASE
        ):
            raise DevicePermissionError(
                f"{Path(argv[0]).name} could not {doing} ({last}): it needs root: run with sudo or use the governor daemon"
            )
        if re.search(r"reboot", err_text, re.IGNORECASE):
            raise GovernorError(f"{Path(argv[0]).name} could not {doing} without a reboot ({last})")
        raise GovernorError(f"{Path(argv[0]).name} could not {doing}: {last}")
    return out


class Nvpmodel:
    """The board's nvpmodel power modes."""

    def __init__(self, executable: str, fs: SysfsRoot) -> None:
        self.executable = executable
        self.fs = fs
        self._modes: Optional[List[Tuple[int, str]]] = None

    def query(self) -> Tuple[str, Optional[int]]:
        """(mode name, mode id) of the current power mode."""
        out = _run([self.executable, "-q"], "query the power mode")
        match = re.search(r"NV Power Mode:\s*(\S+)", out)
        if not match:
            raise GovernorError(f"unexpected nvpmodel -q output: {out.strip()[:120]!r}")
        after = out[match.end() :].split()
        mode_id = int(after[0]) if after and after[0].isdigit() else None
        return match.group(1), mode_id

    def modes(self) -> List[Tuple[int, str]]:
        """(id, name) of every power mode, by id."""
        if self._modes is None:
            text = self.fs.read_optional(self.fs.path("/etc/nvpmodel.conf")) or ""
            found = {int(i): n for i, n in _MODE_LINE.findall(text)}
            if not found:
                verbose = _run([self.executable, "-q", "--verbose"], "list the power modes")
                found = {int(i): n for i, n in _MODE_LINE.findall(verbose)}
            self._modes = sorted(found.items())
        return list(self._modes)

    def gpu_cap_mhz(self, name: str) -> Optional[float]:
        """The GPU clock cap (MHz) of mode ``name`` from ``/etc/nvpmodel.conf``
        (``GPU MAX_FREQ <Hz>`` in the mode's block), or None when the file does not say."""
        text = self.fs.read_optional(self.fs.path("/etc/nvpmodel.conf")) or ""
        for block in re.split(r"(?m)^(?=\s*<)", text):  # one block per "< ... >" header
            head = _MODE_LINE.search(block.split(">", 1)[0])
            if not head or head.group(2) != name:
                continue
            found = re.search(r"(?m)^\s*GPU\s+MAX_FREQ\s+(-?\d+)\s*$", block)
            if found and int(found.group(1)) > 0:
                return int(found.group(1)) / 1e6
            return None
        return None

    def set(self, name: str) -> None:
        """Switch to the mode called ``name``."""
        ids = [i for i, n in self.modes() if n == name]
        if not ids:
            raise UnsupportedError(f"nvpmodel has no mode {name!r}")
        _run([self.executable, "-m", str(ids[0])], f"switch to power mode {name}")


class JetsonClocks:
    """``jetson_clocks``: store and restore every clock of the board."""

    def __init__(self, executable: str) -> None:
        self.executable = executable

    def store(self, path: Path) -> None:
        _run([self.executable, "--store", str(path)], "store the clocks")

    def restore(self, path: Path) -> None:
        _run([self.executable, "--restore", str(path)], "restore the clocks")

    def show(self) -> str:
        return _run([self.executable, "--show"], "show the clocks")
