"""``nvpmodel`` and ``jetson_clocks``, found on PATH and run with argument lists (never a shell).

- ``nvpmodel -p --verbose`` parses the configuration and prints one
  ``NVPM VERB: POWER_MODEL: ID=<n> NAME=<NAME>`` line per mode: that lists the modes
  (``-q --verbose`` prints only the active mode's line). ``/etc/nvpmodel.conf`` (read under the
  sysfs root, ``< POWER_MODEL ID=<n> NAME=<NAME> >`` headers) is the fallback.
- ``nvpmodel -q`` prints ``NV Power Mode: <NAME>`` then the mode id (without root, newer
  releases add ``NVPM ERROR`` lines about files they could not open: harmless there).
- ``nvpmodel -m <id>`` switches. It can fail printing only ``NVPM ERROR`` lines and exiting 0
  (a mode that needs a reboot: nvpmodel asks on stdin and gets no answer from us; an id the
  board lacks), so its output is checked and the mode is read back with ``-q``.
  Real outputs are in ``tests/data/nvpmodel/``.
- ``jetson_clocks --store FILE`` / ``--restore FILE`` save and restore every clock.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from governor.devices.jetson.sysfs import SysfsRoot
from governor.errors import DevicePermissionError, GovernorError, UnsupportedError

__all__ = ["JetsonClocks", "Nvpmodel", "find_tool", "mode_gpu_cap_mhz"]

log = logging.getLogger("governor.devices.jetson")

_TIMEOUT_S = 30.0
_MODE_LINE = re.compile(r"POWER_MODEL:?\s+ID\s*=\s*(\d+)\s+NAME\s*=\s*([^\s>]+)")


def find_tool(name: str) -> Optional[str]:
    """The executable ``name`` on PATH, or None."""
    return shutil.which(name)


def _is_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return bool(geteuid and geteuid() == 0)


def _run(argv: Sequence[str], doing: str, *, with_stderr: bool = False) -> str:
    """Run a tool; its stdout (and stderr after it when ``with_stderr``). Failures become our
    errors (permission when not root)."""
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
    if with_stderr:
        return out + proc.stderr.decode(errors="replace")
    return out


def mode_gpu_cap_mhz(fs: SysfsRoot, name: str) -> Optional[float]:
    """The GPU clock cap (MHz) of power mode ``name`` from ``/etc/nvpmodel.conf`` under the
    sysfs root (``GPU MAX_FREQ <Hz>`` in the mode's block), or None when the file does not
    say (no such file or mode, no GPU line, or ``-1``: no cap)."""
    text = fs.read_optional(fs.path("/etc/nvpmodel.conf")) or ""
    for block in re.split(r"(?m)^(?=\s*<)", text):  # one block per "< ... >" header
        head = _MODE_LINE.search(block.split(">", 1)[0])
        if not head or head.group(2) != name:
            continue
        found = re.search(r"(?m)^\s*GPU\s+MAX_FREQ\s+(-?\d+)\s*$", block)
        if found and int(found.group(1)) > 0:
            return int(found.group(1)) / 1e6
        return None
    return None


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
        """(id, name) of every power mode, by id: ``nvpmodel -p --verbose``, else the modes
        named in /etc/nvpmodel.conf."""
        if self._modes is None:
            found = {}
            try:
                parsed = _run(
                    [self.executable, "-p", "--verbose"], "list the power modes", with_stderr=True
                )
                found = {int(i): n for i, n in _MODE_LINE.findall(parsed)}
            except GovernorError as err:
                log.info("nvpmodel -p --verbose: %s", err)
            if not found:
                text = self.fs.read_optional(self.fs.path("/etc/nvpmodel.conf")) or ""
                found = {int(i): n for i, n in _MODE_LINE.findall(text)}
            self._modes = sorted(found.items())
        return list(self._modes)

    def gpu_cap_mhz(self, name: str) -> Optional[float]:
        """The GPU clock cap (MHz) of mode ``name`` (:func:`mode_gpu_cap_mhz`)."""
        return mode_gpu_cap_mhz(self.fs, name)

    def set(self, name: str) -> None:
        """Switch to the mode called ``name`` and confirm it with ``nvpmodel -q``.

        Raises:
            UnsupportedError: no such mode. DevicePermissionError: not root.
            GovernorError: nvpmodel printed NVPM ERROR (whatever its exit status), the mode
            needs a reboot, or ``-q`` still reports another mode.
        """
        ids = [i for i, n in self.modes() if n == name]
        if not ids:
            raise UnsupportedError(f"nvpmodel has no mode {name!r}")
        doing = f"switch to power mode {name}"
        out = _run([self.executable, "-m", str(ids[0])], doing, with_stderr=True)
        errors = [line.strip() for line in out.splitlines() if "NVPM ERROR" in line]
        if errors:
            if re.search(r"reboot", out, re.IGNORECASE):
                raise GovernorError(
                    f"nvpmodel could not {doing} without a reboot ({errors[-1]}): "
                    f"run sudo nvpmodel -m {ids[0]} and reboot"
                )
            if re.search(r"permission|denied|not permitted", out, re.IGNORECASE):
                raise DevicePermissionError(
                    f"nvpmodel could not {doing} ({errors[-1]}): it needs root: run with sudo "
                    "or use the governor daemon"
                )
            raise GovernorError(f"nvpmodel could not {doing}: {errors[-1]}")
        now, now_id = self.query()
        if now != name:
            raise GovernorError(
                f"nvpmodel -m {ids[0]} reported no error but the board is still in {now} "
                f"(id {now_id}), not {name}"
            )


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
