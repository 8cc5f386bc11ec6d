"""``governor doctor``: what this machine has, what is missing, and the command that fixes it.

Each check is one row: ``ok``, ``missing`` (something governor could use is absent) or
``problem`` (something present does not work), with what was found and, where there is one,
the exact command to run. Nothing here changes a device; reading one is all it does.
"""

from __future__ import annotations

import importlib
import os
import platform
import shutil
from typing import Any, Callable, Dict, List, Optional

import typer

from governor.cli.common import Annotated, JsonOpt, emit_json

DIST = "gpu-governor"


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor_command)


def _row(check: str, status: str, found: str, fix: Optional[str] = None) -> Dict[str, Any]:
    return {"check": check, "status": status, "found": found, "fix": fix}


_DISTRIBUTIONS = {"pynvml": "nvidia-ml-py", "jtop": "jetson-stats"}


def _module_version(name: str) -> Optional[str]:
    """The installed version of the package that provides module ``name``; None if it does
    not import."""
    try:
        module = importlib.import_module(name)
    except Exception:  # an extra that is broken counts as absent here; its row says so
        return None
    version = getattr(module, "__version__", None)
    if not version:
        try:
            from importlib.metadata import version as dist_version

            version = dist_version(_DISTRIBUTIONS.get(name, name))
        except Exception:
            version = "installed"
    return str(version)


def _python() -> List[Dict[str, Any]]:
    from governor._version import __version__

    found = f"governor {__version__} on Python {platform.python_version()} ({platform.machine()})"
    return [_row("python", "ok", found)]


def _nvml() -> List[Dict[str, Any]]:
    rows = []
    try:
        import pynvml
    except ImportError:
        return [
            _row(
                "nvml binding",
                "missing",
                "nvidia-ml-py is not installed",
                f"pip install --upgrade {DIST}   # brings nvidia-ml-py",
            )
        ]
    rows.append(_row("nvml binding", "ok", f"nvidia-ml-py {_module_version('pynvml')}"))
    try:
        pynvml.nvmlInit()
    except Exception as err:  # NVMLError (no driver) or OSError (library missing)
        rows.append(
            _row(
                "nvidia driver",
                "missing",
                f"NVML did not start: {err}",
                "install the NVIDIA driver (on a Jetson, NVML does not govern: use the jetson backend)",
            )
        )
        return rows
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        rows.append(_row("nvidia driver", "ok", f"driver {driver}, {count} GPU(s)"))
    except Exception as err:
        rows.append(_row("nvidia driver", "problem", f"NVML answered with an error: {err}"))
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return rows


def _jetson() -> List[Dict[str, Any]]:
    from governor.devices.jetson.sysfs import SysfsRoot, find_gpu_devfreq
    from governor.devices.jetson.tools import find_tool

    fs = SysfsRoot()
    node = find_gpu_devfreq(fs)
    if node is None:
        return [_row("jetson", "ok", "not a Jetson (no GPU devfreq node)")]
    rows = [_row("jetson", "ok", f"GPU devfreq node {fs.shown(node)}")]
    for tool, why in (
        ("nvpmodel", "power modes"),
        ("jetson_clocks", "storing and restoring every clock"),
        ("tegrastats", "the tegrastats backend"),
    ):
        where = find_tool(tool)
        rows.append(
            _row(
                tool,
                "ok" if where else "missing",
                str(where) if where else f"not on PATH ({why} unavailable)",
                None if where else "install NVIDIA's L4T tools (nvidia-l4t-tools) for your JetPack",
            )
        )
    writable = os.access(str(node / "min_freq"), os.W_OK)
    rows.append(
        _row(
            "devfreq write",
            "ok" if writable else "missing",
            "this user may set GPU clocks" if writable else "only root may set GPU clocks",
            None
            if writable
            else "run as root (sudo governor ...) or start the daemon: sudo governor daemon --config FILE",
        )
    )
    return rows


# (module, extra, what needs it, the fix when it is missing)
_EXTRAS = (
    ("cupy", "cuda", "the built-in GPU calibration load", None),
    ("matplotlib", "plot", "calibrate --plot", None),
    ("prometheus_client", "metrics", "governor exporter", None),
    ("mcap", "mcap", "monitor --mcap recordings", None),
    (
        "rclpy",
        "ros2",
        "governor ros2",
        f"pip install '{DIST}[ros2]' (Python 3.10-3.12), or source your ROS 2 setup.bash",
    ),
    (
        "jtop",
        "jetson",
        "the jtop backend, on a Jetson",
        f"pip install '{DIST}[jetson]' (the jtop service itself: sudo pip3 install -U jetson-stats)",
    ),
)


def _extras() -> List[Dict[str, Any]]:
    rows = []
    for module, extra, why, fix in _EXTRAS:
        version = _module_version(module)
        rows.append(
            _row(
                module,
                "ok" if version else "missing",
                f"{module} {version}" if version else f"not installed ({why})",
                None if version else fix or f"pip install '{DIST}[{extra}]'",
            )
        )
    return rows


def _nvrtc() -> List[Dict[str, Any]]:
    """NVRTC: ``governor kernels`` compiles the library's kernels for any board without a GPU."""
    from governor.errors import GovernorError
    from governor.kernels.nvrtc import nvrtc_version

    try:
        version = nvrtc_version()
    except GovernorError:
        return [
            _row(
                "nvrtc",
                "missing",
                "not installed (governor kernels: compile and check kernels without a GPU)",
                f"pip install '{DIST}[nvrtc]' (Python 3.9 or newer)",
            )
        ]
    return [_row("nvrtc", "ok", f"NVRTC {version}")]


def _state() -> List[Dict[str, Any]]:
    from governor.devices.lock import ensure_state_dir
    from governor.devices.ownership import journals_on_disk
    from governor.errors import GovernorError
    from governor.paths import state_dir

    path = state_dir()
    if not path.exists():
        return [_row("state dir", "ok", f"{path} (created on the first change)")]
    try:
        ensure_state_dir(path)
    except GovernorError as err:
        return [_row("state dir", "problem", str(err), f"chmod 700 {path}")]
    rows = [_row("state dir", "ok", str(path))]
    pending = journals_on_disk(path)
    if pending:
        names = ", ".join(j.uri if j is not None else p.name for p, j, _ in pending)
        rows.append(
            _row(
                "journals",
                "problem",
                f"settings changed and not restored yet: {names}",
                "governor reset --all   (or keep them: they are a 'governor apply')",
            )
        )
    return rows


def _devices() -> List[Dict[str, Any]]:
    from governor.devices.registry import discover_hardware, open_device
    from governor.errors import GovernorError
    from governor.profiles.profile import board_key, find_profile

    uris = discover_hardware()
    if not uris:
        return [
            _row(
                "devices",
                "missing",
                "no GPU found: commands use the simulated board sim:agx-orin",
                "on a GPU machine: install the driver; on a Jetson: check /sys/class/devfreq",
            )
        ]
    rows = []
    for uri in uris:
        try:
            with open_device(uri) as dev:
                board = board_key(dev)
                found = find_profile(board)
                name = f"{uri}: {dev.identity.name}"
                reason = dev.control_reason()
        except GovernorError as err:
            rows.append(_row("device", "problem", f"{uri}: {err}"))
            continue
        rows.append(
            _row("device", "ok", name + ("" if reason is None else f" (read only: {reason})"))
        )
        rows.append(
            _row(
                "profile",
                "ok" if found else "missing",
                f"{board}: {found[0]}" if found else f"{board} is not calibrated",
                None if found else f"governor calibrate --device {uri}",
            )
        )
    return rows


CHECKS: List[Callable[[], List[Dict[str, Any]]]] = [
    _python,
    _nvml,
    _jetson,
    _extras,
    _nvrtc,
    _state,
    _devices,
]


def run_checks() -> List[Dict[str, Any]]:
    rows: List[Dict[str, Any]] = []
    for check in CHECKS:
        try:
            rows.extend(check())
        except Exception as err:  # a broken check is a finding, never a traceback
            rows.append(_row(check.__name__.strip("_"), "problem", f"check failed: {err}"))
    return rows


def _gpu_check(out_dir: str) -> int:
    """Run ``scripts/gpu_check.py --out OUT_DIR`` of this checkout; returns its exit status.

    Raises:
        InvalidRequestError: governor runs from an installed wheel, which has no scripts.
    """
    import subprocess
    import sys
    from pathlib import Path

    from governor.errors import InvalidRequestError

    script = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.py"
    if not script.is_file():
        raise InvalidRequestError(
            "the GPU check ships with governor's source, not with the wheel: from a checkout, "
            "run python scripts/gpu_check.py --out DIR"
        )
    return subprocess.call([sys.executable, str(script), "--out", out_dir])


def doctor_command(
    json_out: JsonOpt = False,
    gpu_check: Annotated[
        Optional[str],
        typer.Option(
            "--gpu-check",
            metavar="DIR",
            help="Instead: run scripts/gpu_check.py (a source checkout's end-to-end check of an "
            "NVIDIA GPU, about 5 minutes) and write its report to DIR.",
        ),
    ] = None,
) -> None:
    """Say what governor found on this machine, what is missing, and how to fix it."""
    if gpu_check is not None:
        raise typer.Exit(_gpu_check(gpu_check))
    rows = run_checks()
    if json_out:
        emit_json({"checks": rows, "ok": all(r["status"] != "problem" for r in rows)})
        return
    width = max(len(r["check"]) for r in rows)
    mark = {"ok": "ok", "missing": "--", "problem": "!!"}
    for r in rows:
        typer.echo(f"{mark[r['status']]:>2}  {r['check']:<{width}}  {r['found']}")
        if r["fix"]:
            typer.echo(f"{'':>2}  {'':<{width}}  fix: {r['fix']}")
    if shutil.which("governor") is None:
        typer.echo("note: the 'governor' command is not on PATH (activate the venv it is in)")
