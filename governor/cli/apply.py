"""``governor apply`` and ``governor reset``: persistent settings, and undoing them.

``apply`` takes the device, changes it and keeps its journal layer on disk, so the change
lasts until ``governor reset --device URI`` (which also undoes a governor killed with
``kill -9``); a ``governor run`` started later returns to the applied state when it ends. A
simulated board lives in the command's process: ``apply`` shows what it would set and says
that nothing outlives the command (so there is nothing to reset). ``reset --all`` resets
every device that has a journal.

What cannot be applied as asked is said on stderr and in the JSON ``notes`` (exit code 0, the
change is made): a clock between two supported clocks is snapped to the nearer, and ``ppw``
on a board with no profile of its own sets a guessed clock (75 % of the top), labelled as a
guess, with the command that calibrates the board. A clock outside the board's range, or a
power limit outside its limits, is refused (exit 1) and nothing is changed.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

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
    mem_clock: Annotated[
        Optional[float],
        typer.Option(
            "--mem-clock",
            callback=values.number(gt=0, le=100000.0, unit="MHz"),
            help="Lock the memory clock to this MHz (snapped to a supported memory clock; "
            "boards with several: Jetson EMC through debugfs as root, NVML GPUs that offer more "
            "than one).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Apply ppw, max, a clock, a memory clock or a power limit until 'governor reset'."""
    from governor.devices.registry import open_device
    from governor.errors import InvalidRequestError
    from governor.runtime.model import fallback_model, model_from_profile
    from governor.runtime.policies import CLIENT_POLICIES  # the profile policies: ppw, max

    if target is not None and target not in CLIENT_POLICIES:
        raise InvalidRequestError(
            f"apply takes {' or '.join(CLIENT_POLICIES)}, not {target!r} "
            "(or --clock MHZ / --power-limit W)"
        )
    if target is not None and clock is not None:
        raise InvalidRequestError(f"give either {target} or --clock, not both")
    if target is None and clock is None and power_limit is None and mem_clock is None:
        raise InvalidRequestError(
            "nothing to apply: give ppw, max, --clock MHZ, --mem-clock MHZ or --power-limit W"
        )
    if workload is not None and target != "ppw":
        raise InvalidRequestError("--workload only goes with ppw")
    from governor.devices.registry import resolve_uris

    uris = resolve_uris(device)
    docs = []
    held = []
    try:
        for uri in uris:
            doc, dev = _apply_one(
                uri,
                target,
                clock,
                power_limit,
                workload,
                open_device,
                model_from_profile,
                fallback_model,
                mem_clock,
            )
            docs.append(doc)
            held.append(dev)
        for dev in held:  # every device took its change: keep them until 'governor reset'
            dev.release(keep=True)
    finally:
        for dev in held:
            dev.close()  # all or nothing: a device still held here is restored
    if json_out:
        emit_json(docs[0] if len(docs) == 1 else {"devices": docs})
        return
    for doc in docs:
        applied = doc["applied"]
        parts = []
        if "gpu_clocks_mhz" in applied:
            parts.append(f"GPU clock {applied['gpu_clocks_mhz'][0]:g} MHz")
        if "mem_clock_mhz" in applied:
            parts.append(f"memory clock {applied['mem_clock_mhz']:g} MHz")
        if "power_limit_w" in applied:
            parts.append(f"power limit {applied['power_limit_w']:g} W")
        label = target or "manual"
        if doc.get("guessed"):
            label += ", a guess: no calibrated profile"
        if doc["simulated"]:
            typer.echo(
                f"{doc['device']}: {', '.join(parts)} ({label}) for this command only: a "
                "simulated board lives in its process, so nothing outlives it or needs a reset"
            )
        else:
            typer.echo(
                f"{doc['device']}: {', '.join(parts)} ({label}); undo with "
                f"'governor reset --device {doc['device']}'"
            )


def _apply_one(
    uri,
    target,
    clock,
    power_limit,
    workload,
    open_device,
    model_from_profile,
    fallback_model,
    mem_clock=None,
):
    """Apply to one device, still holding it; returns its JSON document and the device (the
    caller keeps the change once every device took it, or closes it to restore it)."""
    from governor.errors import InvalidRequestError
    from governor.runtime.unmet import clock_note

    notes = []
    guessed = False
    dev = open_device(uri)
    try:
        # decide and validate everything before taking the device
        clock_mhz: Optional[float] = None
        if target == "max":
            clock_mhz = dev.supported_clocks_mhz()[-1]
        elif target == "ppw":
            clock_mhz, note, pair, pair_note = _ppw_clock(
                dev, workload, model_from_profile, fallback_model, mem_clock is None
            )
            if note:
                guessed = True
                note += f"; calibrate it once with 'governor calibrate --device {dev.uri}'"
            if pair is not None:  # the profile's (core, memory) pair: both clocks set
                clock_mhz, mem_clock = pair
                note = f"the profile's PPW pair: {pair[0]:g} MHz core, {pair[1]:g} MHz memory"
            for said in (note, pair_note):
                if said:
                    notes.append(said)
                    typer.echo(f"governor: {said}", err=True)
        elif clock is not None:
            values.check_clock_scale(clock, dev.supported_clocks_mhz(), dev.uri)
            clock_mhz = dev.snap_clock_mhz(clock)  # outside the range: refused
            note = clock_note(clock, dev.supported_clocks_mhz(), dev.uri)
            if note:
                notes.append(note)
                typer.echo(f"governor: {note}", err=True)
        if clock_mhz is not None and not dev.capabilities.lock_gpu_clocks:
            raise InvalidRequestError(f"{dev.uri} cannot lock its GPU clock")
        mem_mhz: Optional[float] = None
        if mem_clock is not None:
            mem_mhz = _mem_clock(dev, mem_clock, notes)
        if power_limit is not None:
            limits = dev.power_limit_range()
            if not dev.capabilities.power_limit or limits is None:
                raise InvalidRequestError(f"{dev.uri} has no settable power limit")
            if not (limits.min_w <= power_limit <= limits.max_w):
                raise InvalidRequestError(
                    f"power limit {power_limit:g} W is outside {limits.min_w:g}-{limits.max_w:g} W for {dev.identity.name}"
                )
        dev.acquire(command=_command_line("apply"))  # DeviceBusyError under a live governor
        for note in dev.ownership_notes + dev.control_notes():
            notes.append(note)
            typer.echo(f"governor: {note}", err=True)
        previous = dev.state().to_dict()
        applied: Dict[str, Any] = {}
        if clock_mhz is not None:
            lo, hi = dev.lock_gpu_clocks(clock_mhz)
            applied["gpu_clocks_mhz"] = [lo, hi]
        if mem_mhz is not None:
            applied["mem_clock_mhz"] = dev.lock_mem_clock(mem_mhz)
        if power_limit is not None:
            applied["power_limit_w"] = dev.set_power_limit(power_limit)
        if target:
            applied["policy"] = target
    except BaseException:
        dev.close()  # restores what this apply did before it failed
        raise
    simulated = not dev.persistent_state
    doc = {
        "device": dev.uri,
        "key": dev.identity.key or dev.uri,
        "applied": applied,
        "previous": previous,
        "simulated": simulated,
        "persists": not simulated,
        "guessed": guessed,
        "notes": notes,
    }
    return doc, dev


def _mem_clock(dev: Any, wanted_mhz: float, notes: List[str]) -> float:
    """The supported memory clock nearest ``wanted_mhz`` (said when it differs).

    Raises:
        InvalidRequestError: the device cannot lock its memory clock (why, in one line), or
            the clock is outside its range.
    """
    from governor.errors import InvalidRequestError

    if not dev.capabilities.lock_mem_clock:
        why = "; ".join(dev.control_notes()) or "it offers one memory clock, or none it can set"
        raise InvalidRequestError(f"{dev.uri} cannot lock its memory clock: {why}")
    snapped = dev.snap_clock_mhz(wanted_mhz, mem=True)
    if abs(snapped - wanted_mhz) > 1e-6:
        table = ", ".join(f"{m:g}" for m in dev.supported_mem_clocks_mhz())
        note = (
            f"memory clock {wanted_mhz:g} MHz snapped to {snapped:g} MHz, the nearest of "
            f"{dev.uri}'s memory clocks ({table} MHz)"
        )
        notes.append(note)
        typer.echo(f"governor: {note}", err=True)
    return snapped


def _command_line(verb: str) -> str:
    import sys

    return "governor " + " ".join([verb] + sys.argv[2:])[:180]


def _ppw_clock(dev, workload, model_from_profile, fallback_model, with_pair=False):
    """``(core clock, note, pair, pair note)``: the PPW clock and a note when guessed (no
    profile for this board, or another board's). With ``with_pair`` (no ``--mem-clock``
    given), the profile's (core, memory) pair where it keeps one and the device can set its
    memory clock (else None, and the pair note says why the core clock is set alone). A malformed
    profile raises ProfileError before anything is changed."""
    from dataclasses import replace

    from governor.profiles.profile import lookup_profile_for
    from governor.runtime.model import ppw_pair_for, prior_reason

    clocks = dev.supported_clocks_mhz()
    path, doc, notes = lookup_profile_for(dev)
    if doc is None:
        model = fallback_model(clocks, notes[0])
        return model.ppw_clock_mhz, model.source, None, None
    if workload is not None and workload not in (doc.get("workloads") or {}):
        from governor.errors import InvalidRequestError

        known = ", ".join(sorted(doc.get("workloads") or {})) or "none"
        raise InvalidRequestError(
            f"the profile has no calibration of workload {workload!r} (known: {known})"
        )
    model = model_from_profile(clocks, doc, workload=workload, source=f"profile {path}")
    if not with_pair:
        return model.ppw_clock_mhz, None, None, None
    if prior_reason(doc, dev) is not None:  # not this unit's calibration: its own clock
        model = replace(model, prior=True)
    pair, pair_note = ppw_pair_for(dev, model)
    return model.ppw_clock_mhz, None, pair, pair_note or None


def reset_command(
    device: DeviceOpt = "auto",
    all_devices: Annotated[
        bool,
        typer.Option(
            "--all", help="Reset every device that has a journal (--device all: every GPU found)."
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Restore a device from its journal (after 'governor apply' or a killed governor).

    Every field is tried; those that fail are reported (exit 1) and stay journaled. A corrupt
    journal is set aside and the device put back to its driver defaults.
    """
    from governor.devices.ownership import reset_device
    from governor.devices.registry import open_device, resolve_uris
    from governor.devices.reset import reset_all

    simulated = set()
    if all_devices:
        reports = reset_all()
    else:
        reports = []
        for uri in resolve_uris(device):
            dev = open_device(uri)
            try:
                reports.append(reset_device(dev, command=_command_line("reset")))
                if not dev.persistent_state:
                    simulated.add(dev.uri)
            finally:
                dev.close()
    failed = any(r["failed"] for r in reports)
    if json_out:
        emit_json({"devices": [dict(r) for r in reports], "ok": not failed})
    else:
        if not reports:
            typer.echo("nothing to restore (no journals)")
        for r in reports:
            for note in r["notes"]:
                typer.echo(f"governor: {note}", err=True)
            if r["restored"]:
                typer.echo(
                    f"{r['device']}: restored "
                    + ", ".join(f"{k}={v}" for k, v in r["restored"].items())
                )
            elif r["device"] in simulated and not r["failed"]:
                typer.echo(
                    f"{r['device']}: nothing to restore: a simulated board lives in one "
                    "command's process and keeps nothing between commands"
                )
            elif not r["failed"]:
                typer.echo(f"{r['device']}: nothing to restore (no journal)")
            for name, why in r["failed"].items():
                typer.echo(f"governor: error: {r['device']}: {name}: {why}", err=True)
    if failed:
        raise typer.Exit(1)
