"""``governor apply`` and ``governor reset``: persistent settings, and undoing them.

``apply`` changes the device and leaves its journal on disk, so the change lasts until
``governor reset --device URI`` (which also undoes a governor killed with ``kill -9``). On a
simulated board the board lives in the command's process: ``apply`` shows what it would set
and leaves the journal, which ``reset`` then clears and reports.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, DeviceOpt, JsonOpt, emit_json


def register(app: typer.Typer) -> None:
    app.command("apply")(apply_command)
    app.command("reset")(reset_command)


def apply_command(
    target: Annotated[
        Optional[str],
        typer.Argument(help="ppw (the profile's PPW-optimal clock) or max (the top clock)."),
    ] = None,
    device: DeviceOpt = "auto",
    clock: Annotated[
        Optional[float],
        typer.Option(
            "--clock",
            callback=values.policy_number("clock_mhz"),
            help="Lock the GPU clock to this MHz (snapped to a supported clock).",
        ),
    ] = None,
    power_limit: Annotated[
        Optional[float],
        typer.Option(
            "--power-limit",
            callback=values.policy_number("cap_w"),
            help="Set the board power limit (W).",
        ),
    ] = None,
    workload: Annotated[
        Optional[str],
        typer.Option("--workload", help="With ppw: the profile's calibration of this load."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Apply ppw, max, a clock or a power limit until 'governor reset'."""
    from governor.devices.registry import open_device
    from governor.errors import InvalidRequestError
    from governor.runtime.lock import DeviceLock
    from governor.runtime.model import fallback_model, model_from_profile
    from governor.runtime.state import journal_file, use_disk_journal

    if target is not None and target not in ("ppw", "max"):
        raise InvalidRequestError(
            f"apply takes ppw or max, not {target!r} (or --clock MHZ / --power-limit W)"
        )
    if target is not None and clock is not None:
        raise InvalidRequestError(f"give either {target} or --clock, not both")
    if target is None and clock is None and power_limit is None:
        raise InvalidRequestError("nothing to apply: give ppw, max, --clock MHZ or --power-limit W")
    if workload is not None and target != "ppw":
        raise InvalidRequestError("--workload only goes with ppw")
    notes = []
    dev = open_device(device)
    try:
        with DeviceLock(dev.uri):
            # decide and validate everything before the first change
            clock_mhz: Optional[float] = None
            if target == "max":
                clock_mhz = dev.supported_clocks_mhz()[-1]
            elif target == "ppw":
                clock_mhz, note = _ppw_clock(dev, workload, model_from_profile, fallback_model)
                if note:
                    notes.append(note)
                    typer.echo(f"governor: {note}", err=True)
            elif clock is not None:
                clock_mhz = dev.snap_clock_mhz(clock)
            if clock_mhz is not None and not dev.capabilities.lock_gpu_clocks:
                raise InvalidRequestError(f"{dev.uri} cannot lock its GPU clock")
            if power_limit is not None:
                limits = dev.power_limit_range()
                if not dev.capabilities.power_limit or limits is None:
                    raise InvalidRequestError(f"{dev.uri} has no settable power limit")
                if not (limits.min_w <= power_limit <= limits.max_w):
                    raise InvalidRequestError(
                        f"power limit {power_limit:g} W is outside {limits.min_w:g}-{limits.max_w:g} W for {dev.identity.name}"
                    )
            previous = dev.state().to_dict()
            journal = use_disk_journal(dev)
            was_changed = bool(journal)
            applied: Dict[str, Any] = {}
            try:
                if clock_mhz is not None:
                    lo, hi = dev.lock_gpu_clocks(clock_mhz)
                    applied["gpu_clocks_mhz"] = [lo, hi]
                if power_limit is not None:
                    applied["power_limit_w"] = dev.set_power_limit(power_limit)
            except BaseException:
                if not was_changed:
                    dev.restore()
                raise
            if target:
                applied["policy"] = target
    finally:
        dev.close()  # not restore: the change stays until 'governor reset'
    doc = {
        "device": dev.uri,
        "applied": applied,
        "previous": previous,
        "journal": str(journal_file(dev.uri)),
        "simulated": dev.identity.kind == "sim",
        "notes": notes,
    }
    if json_out:
        emit_json(doc)
        return
    parts = []
    if "gpu_clocks_mhz" in applied:
        parts.append(f"GPU clock {applied['gpu_clocks_mhz'][0]:g} MHz")
    if "power_limit_w" in applied:
        parts.append(f"power limit {applied['power_limit_w']:g} W")
    typer.echo(
        f"{dev.uri}: {', '.join(parts)} ({target or 'manual'}); undo with 'governor reset --device {dev.uri}'"
    )
    if doc["simulated"]:
        typer.echo(
            "note: a simulated board lives in this process; only the journal remains", err=True
        )


def _ppw_clock(dev, workload, model_from_profile, fallback_model):
    from governor.errors import ProfileError
    from governor.profiles.profile import load_profile_for

    clocks = dev.supported_clocks_mhz()
    try:
        _, doc, _ = load_profile_for(dev)
    except ProfileError as err:
        model = fallback_model(clocks, str(err))
        return model.ppw_clock_mhz, model.source
    if workload is not None and workload not in (doc.get("workloads") or {}):
        from governor.errors import InvalidRequestError

        known = ", ".join(sorted(doc.get("workloads") or {})) or "none"
        raise InvalidRequestError(
            f"the profile has no calibration of workload {workload!r} (known: {known})"
        )
    return model_from_profile(clocks, doc, workload=workload).ppw_clock_mhz, None


def reset_command(
    device: DeviceOpt = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Restore a device from its journal (after 'governor apply' or a killed governor)."""
    from governor.runtime.lock import DeviceLock
    from governor.runtime.state import reset_device

    uri = device
    if device == "auto":
        from governor.devices.registry import open_device

        dev = open_device("auto")
        uri = dev.uri
        dev.close()
    with DeviceLock(uri):  # never under a running governor's feet
        restored = reset_device(uri)
    doc = {"device": uri, "restored": restored}
    if json_out:
        emit_json(doc)
    elif restored:
        typer.echo(f"{uri}: restored " + ", ".join(f"{k}={v}" for k, v in restored.items()))
    else:
        typer.echo(f"{uri}: nothing to restore (no journal)")
