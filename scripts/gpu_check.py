#!/usr/bin/env python3
"""Prove governor on a real NVIDIA GPU in minutes: one command, one report.

    python scripts/gpu_check.py --out DIR            # about 5 minutes, 7.5 at most
    python scripts/gpu_check.py --out DIR --quick    # about 3 minutes

Runs from a plain checkout (``PYTHONPATH=.`` or not: the script finds the repository) with
numpy, scipy, rich, typer, nvidia-ml-py and, for the loads, CuPy (``cupy-cuda12x`` or
``cupy-cuda13x``); prometheus-client for the exporter step. Steps, in order: discovery,
telemetry, loads, control, calibration, energy-windows, kernels, tune-blocks, exporter. Each
prints one progress line and ends as pass, fail (with a one-line reason) or skip (saying
why); none stops the others. ``DIR/report.json`` and ``DIR/report.md`` hold the result.

Every change to the GPU is journaled by governor's ownership machinery and restored when its
step ends, on an error or on Ctrl-C / SIGTERM; a final ``governor reset`` follows (unless a
journal from before the check exists, which is left alone and reported). Where the driver
refuses control (containers), the check says so once and runs the read-only steps.

``--device sim:NAME`` rehearses the whole check on a simulated board (no GPU needed).
Exit status: 0 every step passed or skipped, 1 a step failed or there is no GPU, 2 bad
usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(HERE), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from gpucheck import control_steps, kernel_step, read_steps  # noqa: E402
from gpucheck.core import (  # noqa: E402
    Context,
    Control,
    Interrupts,
    Step,
    StepRecord,
    make_settings,
    one_line,
    run_steps,
)
from gpucheck.report import write_report  # noqa: E402

STEPS = (
    Step("discovery", read_steps.discovery, True),
    Step("telemetry", read_steps.telemetry, True),
    Step("loads", read_steps.loads, True),
    Step("control", control_steps.control, False),
    Step("calibration", control_steps.calibration, False),
    Step("energy-windows", read_steps.energy_windows, True),
    Step("kernels", kernel_step.kernels, True),
    Step("tune-blocks", control_steps.tune_blocks, False),
    Step("exporter", read_steps.exporter, True),
)
STEP_NAMES = tuple(s.name for s in STEPS)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu_check.py",
        description="Check governor end to end on a real NVIDIA GPU and write a report.",
    )
    p.add_argument("--out", required=True, help="Directory for report.json and report.md.")
    p.add_argument(
        "--device",
        default="nvml:0",
        help="The GPU: nvml:N, nvml:GPU-<uuid>, nvml:<PCI bus id>; sim:NAME rehearses on a "
        "simulated board. Default: nvml:0.",
    )
    p.add_argument("--quick", action="store_true", help="Shorter windows: about 3 minutes.")
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="Multiply every window and budget by this (0.5 halves the run; the tests use less).",
    )
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="The run's total time budget in seconds (default 450, 200 with --quick, times "
        "--time-scale); each step's budget follows in proportion.",
    )
    p.add_argument(
        "--read-only", action="store_true", help="Change nothing, even where control is allowed."
    )
    p.add_argument(
        "--only",
        default="",
        help=f"Comma-separated steps to run (the others skip): {', '.join(STEP_NAMES)}.",
    )
    return p


def _software() -> Dict[str, Any]:
    from importlib import metadata

    found: Dict[str, Any] = {"python": platform.python_version()}
    for dist in ("gpu-governor", "nvidia-ml-py", "numpy", "scipy", "prometheus-client"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    from governor._version import __version__

    found["governor"] = __version__
    found["cupy"] = None
    for dist in ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"):
        try:
            found["cupy"] = f"{dist} {metadata.version(dist)}"
            break
        except metadata.PackageNotFoundError:
            continue
    found["summary"] = (
        f"governor {found['governor']}, Python {found['python']}, nvidia-ml-py "
        f"{found['nvidia-ml-py']}, {found['cupy'] or 'no CuPy'}"
    )
    return found


def _journal_layers(device: Any) -> int:
    """Layers journaled for ``device`` before the check (a ``governor apply``...)."""
    if not device.persistent_state:
        return 0
    from governor.devices.journal import read_journal
    from governor.devices.ownership import device_key, journal_path

    try:
        found = read_journal(journal_path(device_key(device)))
    except Exception:  # a corrupt journal counts as present: reset would touch it
        return 1
    return len(found.layers) if found is not None else 0


def _final_reset(ctx: Context) -> Dict[str, Any]:
    """Let the device go (restoring every layer this run holds) and ``governor reset`` it."""
    dev = ctx.device
    doc: Dict[str, Any] = {}
    try:
        while dev.owned:
            dev.release()
    except Exception as err:
        doc["release_error"] = one_line(err)
    if not dev.persistent_state:
        doc["restored"] = dev.restore_everything()
        doc["changed"] = dev.changed
        return doc
    if ctx.journal_before:
        doc["skipped"] = "a journal from before the check exists: left for 'governor reset'"
        return doc
    from governor.devices.ownership import reset_device

    try:
        report = reset_device(dev, command="gpu_check final reset")
        doc.update(restored=report["restored"], failed=report["failed"], notes=report["notes"])
    except Exception as err:
        doc["error"] = one_line(err)
    return doc


def main(
    argv: Optional[Sequence[str]] = None,
    *,
    make_load: Optional[Callable[[Any, str], Any]] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> int:
    args = _parser().parse_args(argv)
    say = progress or (lambda line: print(f"gpu_check: {line}", file=sys.stderr, flush=True))
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in STEP_NAMES]
    if unknown:
        print(
            f"gpu_check: unknown step(s) {', '.join(unknown)}; known: {', '.join(STEP_NAMES)}",
            file=sys.stderr,
        )
        return 2
    try:
        settings = make_settings(args.quick, args.time_scale, args.budget_s)
    except ValueError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 2
    if not (args.device.startswith("nvml:") or args.device.startswith("sim:")):
        print(
            f"gpu_check: {args.device!r} is not an NVIDIA GPU: use nvml:N (or sim:NAME to "
            "rehearse)",
            file=sys.stderr,
        )
        return 2
    from governor.devices.registry import open_device
    from governor.errors import GovernorError

    try:
        device = open_device(args.device)
    except GovernorError as err:
        print(f"gpu_check: no NVIDIA GPU to check ({one_line(err)})", file=sys.stderr)
        return 1
    out_dir = Path(args.out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / ".write-test").write_text("")
        (out_dir / ".write-test").unlink()
    except OSError as err:
        device.close()
        print(
            f"gpu_check: cannot write the report to {out_dir}: {err.strerror or err}",
            file=sys.stderr,
        )
        return 2
    started = time.monotonic()
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    interrupts = Interrupts()
    interrupts.install()
    interrupts.guard(device)
    records: List[StepRecord] = []
    interrupted = False
    ctx: Optional[Context] = None
    try:
        journal_before = _journal_layers(device) > 0  # before anything takes the device
        if args.read_only:
            control = Control(False, "--read-only")
        else:
            control = control_steps.probe_control(device)
        ctx = Context(device, settings, control=control, make_load=make_load, progress=say)
        ctx.journal_before = journal_before
        say(
            f"{device.identity.name} ({device.uri}), driver {device.identity.driver_version}; "
            + (
                "control permitted"
                if control.permitted
                else f"read-only: {control.reason} (every read-only step still runs)"
            )
        )
        if ctx.journal_before:
            say(
                "a governor journal for this GPU exists already: apply/reset and the final "
                "reset leave it alone"
            )
        records, interrupted = run_steps(ctx, STEPS, only=only or None, records=records)
    except KeyboardInterrupt:  # between two steps, or before the first
        interrupted = True
    finally:
        interrupts.depth += 1  # a second Ctrl-C waits for the restore and reset to finish
        try:
            final = _final_reset(ctx) if ctx is not None else {}
        finally:
            device.close()
            interrupts.pending = False
            interrupts.uninstall()
    done = {r.name for r in records}
    records += [
        StepRecord(s.name, "skip", "interrupted", {}, [], s.read_only, 0.0)
        for s in STEPS
        if s.name not in done
    ]
    header = {
        "tool": "scripts/gpu_check.py",
        "date": date,
        "command": " ".join(
            shlex.quote(a)
            for a in [
                sys.executable.rsplit(os.sep, 1)[-1],
                "scripts/gpu_check.py",
                *(argv if argv is not None else sys.argv[1:]),
            ]
        ),
        "gpu": {
            k: getattr(device.identity, k)
            for k in ("uri", "name", "uuid", "model", "driver_version", "key")
        },
        "software": _software(),
        "settings": settings.to_dict(),
        "control": {"permitted": ctx.control.permitted, "reason": ctx.control.reason}
        if ctx is not None
        else None,
        "interrupted": interrupted,
        "final_reset": final,
        "wall_s": round(time.monotonic() - started, 1),
    }
    path = write_report(out_dir, header, records)
    failed = [r.name for r in records if r.status == "fail"]
    say(
        f"report: {path} and {path.with_suffix('.md')}; "
        + (f"failed: {', '.join(failed)}" if failed else "no step failed")
        + f" ({header['wall_s']} s)"
    )
    if interrupted:
        return 130
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
