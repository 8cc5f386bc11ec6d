"""``governor status``: per device, the settings in force, who set them, and what reset restores.

Read-only: it reads the devices, their journals and lock files, and changes none of them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import typer

from governor.cli.common import Annotated, JsonOpt, emit_json

_NAMES = {
    "gpu_clocks": "gpu clocks",
    "mem_clock": "memory clock",
    "power_limit": "power limit",
    "power_mode": "power mode",
}


def register(app: typer.Typer) -> None:
    app.command("status")(status_command)


def status_command(
    device: Annotated[
        Optional[str],
        typer.Option(
            "--device",
            "-d",
            help="Show only these: URI, URI,URI or all (the default: every GPU of this host).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Show each device's clocks and limits in force, who set them (this process, a job, the
    daemon, governor apply or run, another program) and what 'governor reset' would restore.

    Read-only: nothing is locked, written or set aside. Journals of devices that are not
    found now are listed too.
    """
    from governor.devices.lock import DeviceLock
    from governor.devices.ownership import device_key, journal_path, journals_on_disk
    from governor.devices.registry import discover_hardware, open_device, resolve_uris
    from governor.devices.standing import device_standing, journal_standing

    uris = discover_hardware() if device in (None, "all") else resolve_uris(device)
    journals = {path: (journal, problem) for path, journal, problem in journals_on_disk()}
    docs: List[Dict[str, Any]] = []
    for uri in uris:
        with open_device(uri) as dev:
            key = device_key(dev)
            journal, problem = journals.pop(journal_path(key), (None, ""))
            holder = DeviceLock(key).holder() if dev.persistent_state else None
            docs.append(device_standing(dev, journal, problem, holder))
    elsewhere = []
    if device in (None, "all"):  # journals whose device is not here now
        for path, (journal, problem) in sorted(journals.items()):
            key = journal.key if journal is not None else path.name
            entry: Dict[str, Any] = {"key": key, "journal": str(path), "journal_problem": None}
            if journal is not None:
                entry.update(uri=journal.uri, **journal_standing(journal))
            else:
                entry["journal_problem"] = problem
            elsewhere.append(entry)
    if json_out:
        emit_json({"devices": docs, "journals_without_device": elsewhere})
        return
    if not docs and not elsewhere:
        typer.echo(
            "No GPU found and no journals: nothing is set. (Simulated boards keep no state.)"
        )
    for doc in docs:
        _print_device(doc)
    for entry in elsewhere:
        where = entry.get("uri") or entry["key"]
        if entry["journal_problem"]:
            typer.echo(
                f"{where}: journal {entry['journal']} unreadable: {entry['journal_problem']}"
            )
        else:
            typer.echo(
                f"{where}: not found now; its journal would restore "
                + _restores(entry["reset_restores"])
                + f" ({entry['journal']})"
            )


def _value(name: str, value: Any) -> str:
    if value is None:
        return "driver default" if name != "power_mode" else "-"
    if name == "gpu_clocks":
        lo, hi = value
        return f"{lo:g}-{hi:g} MHz"
    if name == "mem_clock":
        return f"{value:g} MHz"
    if name == "power_limit":
        return f"{value:g} W"
    return str(value)


def _who(owner: Dict[str, Any]) -> str:
    who = str(owner.get("who"))
    if owner.get("pid") is None:
        return who
    alive = owner.get("alive")
    state = "running" if alive else ("exited" if alive is False else "on another host")
    if owner.get("this_process"):
        state = "this process"
    return f"{who} (pid {owner['pid']}, {state})"


def _restores(restore: Dict[str, Any]) -> str:
    if not restore:
        return "nothing"
    return ", ".join(f"{_NAMES.get(k, k)} {_value(k, v)}" for k, v in restore.items())


def _print_device(doc: Dict[str, Any]) -> None:
    typer.echo(f"{doc['device']}  {doc['name']}")
    if not doc["keeps_state"]:
        typer.echo(
            "  a simulated board: its settings live in the process that opened it, "
            "so nothing is set between commands"
        )
    for row in doc["settings"]:
        name = _NAMES.get(row["field"], row["field"])
        value = _value(row["field"], row["value"])
        if not row["readable"] and row["set_by"] is None:
            value = "unknown"
            said = "(the driver cannot read it back; governor did not set it)"
        elif row["set_by"] is None:
            said = "default" if row["at_default"] else "(the driver does not tell its default)"
        else:
            said = "set by " + _who(row["set_by"])
            if row["at_default"]:
                said += ", now at the default"
            if not row["readable"]:
                said += " (as its journal says: the driver cannot read it back)"
        typer.echo(f"  {name:<13} {value:<16} {said}")
    held = doc["held_by"]
    typer.echo(f"  {'held by':<13} {_who(held) if held else 'nobody'}")
    if doc["journal_problem"]:
        typer.echo(f"  journal unreadable: {doc['journal_problem']}")
        typer.echo("  reset would set it aside and restore " + _restores(doc["reset_restores"]))
    elif doc["layers"]:
        typer.echo("  reset would restore " + _restores(doc["reset_restores"]))
    else:
        typer.echo("  reset would restore nothing (no journal)")
