"""``governor calibrate``: measure, fit, and store the board's PPW-optimal clock."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional

import typer

from governor.cli import values
from governor.cli.common import Annotated, DeviceOpt, JsonOpt, emit_json

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from governor.calibrate.procedure import Probe


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_command)


def calibrate_command(
    device: DeviceOpt = "auto",
    load: Annotated[
        str,
        typer.Option(
            "--load",
            help='builtin (compute-bound), memory, or "CMD" (your command, run repeatedly; one run = one unit of work).',
        ),
    ] = "builtin",
    max_probes: Annotated[
        int,
        typer.Option(
            "--max-probes",
            callback=values.count(ge=4, le=values.MAX_PROBES),
            help="Most clocks to measure under load (at least 4).",
        ),
    ] = 6,
    window_s: Annotated[
        float,
        typer.Option(
            "--window-s",
            callback=values.number(gt=0, le=values.HOUR_S, unit="seconds"),
            help="Seconds measured at each clock after power settles.",
        ),
    ] = 1.5,
    save: Annotated[
        bool, typer.Option("--save/--no-save", help="Store the result in the board's profile.")
    ] = True,
    plot: Annotated[
        Optional[Path],
        typer.Option("--plot", help="Draw points, fits, ridge and optimum to this PNG."),
    ] = None,
    if_missing: Annotated[
        bool,
        typer.Option(
            "--if-missing",
            help="Skip a device whose board already has a calibrated profile in the data "
            "directory (GOVERNOR_DATA_DIR): run it at every boot, it calibrates each new board once.",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Find the clock with the most work per joule: probe a few clocks, fit, refine, save.

    --device all (or URI,URI) calibrates each device in turn; with --if-missing, a board
    calibrated before (or earlier in the same run) is skipped."""
    from governor.devices.registry import resolve_uris

    uris = ["auto"] if device == "auto" else resolve_uris(device)
    docs = [
        _calibrate_one(uri, load, max_probes, window_s, save, plot, if_missing, json_out)
        for uri in uris
    ]
    if json_out:
        emit_json(docs[0] if len(docs) == 1 else {"devices": docs})


def _user_profile(dev) -> Optional[Path]:
    """The data directory's calibrated profile of ``dev``'s board, if there is one (one that
    breaks the schema's rules is none: calibrating replaces its invalid parts)."""
    from governor.profiles.profile import board_key, invalid_profile
    from governor.profiles.store import profile_paths, read_profile_file

    path = profile_paths(board_key(dev))[0]
    if not path.exists() or invalid_profile(dev) is not None:
        return None
    return path if "power_model" in read_profile_file(path) else None


def _calibrate_one(device, load, max_probes, window_s, save, plot, if_missing, json_out):
    from governor.calibrate.loads import CommandLoad, make_load
    from governor.calibrate.procedure import DeviceProber, Prober, ReplayProber, calibrate
    from governor.devices.registry import last_auto_note, open_device
    from governor.errors import CalibrationError, InvalidRequestError
    from governor.profiles.profile import existing_profile, save_calibration

    dev = open_device(device)
    note = last_auto_note() if device == "auto" else None
    if note:
        typer.echo(f"governor: {note}", err=True)
    elif device == "auto":
        typer.echo(f"governor: calibrating {dev.uri} ({dev.identity.name})", err=True)
    with dev:
        found = _user_profile(dev) if if_missing else None
        if found is not None:
            if not json_out:
                typer.echo(f"{dev.uri}: calibrated before ({found}); skipped")
            return {
                "device": dev.uri,
                "device_name": dev.identity.name,
                "skipped": True,
                "profile_path": str(found),
            }
        if save:
            existing_profile(dev)  # an unreadable or newer profile: refused before probing
        if dev.identity.kind == "replay":
            prober: Prober = ReplayProber(dev)
            load_info = {"kind": "replay", "name": dev.sweep.workload or "recorded"}  # type: ignore[attr-defined]
        else:
            the_load = make_load(dev, load)
            if isinstance(the_load, CommandLoad) and dev.clock.virtual:
                raise InvalidRequestError(
                    f"a command load runs in real time; {dev.uri} runs on virtual time (add ?realtime=1 to a sim: URI)"
                )
            if dev.capabilities.lock_gpu_clocks:
                dev.acquire(command="governor calibrate")  # before measuring: busy fails fast
                for owner_note in dev.ownership_notes:
                    typer.echo(f"governor: {owner_note}", err=True)
            prober = DeviceProber(dev, the_load, window_s=window_s)
            load_info = {"kind": the_load.kind, "name": the_load.name}
        try:
            with _Progress(enabled=not json_out, total=max_probes) as progress:
                result = calibrate(prober, max_probes=max_probes, on_probe=progress.update)
        except CalibrationError as err:
            message = str(err).replace("; raw points kept", "")
            raise CalibrationError(
                f"{message}; raw points kept in {_keep_raw(dev, err.data)}", err.data
            ) from err
        pair = None
        if dev.identity.kind != "replay" and len(dev.supported_mem_clocks_mhz()) > 1:
            pair = _search_pairs(dev, the_load, result, window_s)
        raw_path = _keep_raw(dev, result.fit_error) if result.method == "best-probe" else None
        for warning in result.warnings:
            text = warning.replace("raw points kept", f"raw points kept in {raw_path}")
            typer.echo(f"governor: warning: {text}", err=True)
        saved_notes: list = []
        profile_path = save_calibration(dev, result, load_info, saved_notes) if save else None
        for saved_note in saved_notes:
            typer.echo(f"governor: {saved_note}", err=True)
        plot_path = None
        if plot is not None and result.modelled:
            from governor.calibrate.plot import plot_calibration

            plot_path = plot_calibration(
                result, plot, title=f"{dev.identity.name}: {load_info['name']}"
            )
        doc = _document(dev, result, load_info, profile_path, plot_path, note)
        _add_pair(doc, dev, pair)
        if pair is not None and profile_path is not None:
            _save_pair(Path(profile_path).stem, str(load_info.get("name") or "builtin"), pair)
    if not json_out:
        _print(doc, result)
    return doc


def _search_pairs(dev: Any, load: Any, result: Any, window_s: float) -> Any:
    """The (core, memory) pair with the least board energy per unit (calibrate/pairs.py),
    from the core calibration's PPW-optimal clock; None where the memory clock cannot be
    set (said once)."""
    from governor.calibrate.pairs import PairProber, search_pairs

    if not dev.capabilities.lock_mem_clock:
        for text in dev.control_notes():
            typer.echo(f"governor: {text}", err=True)
        return None
    prober = PairProber(dev, load, window_s=window_s)
    default = dev.state().mem_clock_mhz or dev.sample().mem_clock_mhz
    table = dev.supported_mem_clocks_mhz()
    from governor.errors import GovernorError

    try:
        pair = search_pairs(
            prober,
            dev.supported_clocks_mhz(),
            table,
            result.ppw_optimal_clock_mhz,
            default if default is not None else table[-1],
        )
    except GovernorError as err:  # the core calibration stands: said, and saved as it is
        typer.echo(f"governor: the memory clock search stopped: {err}", err=True)
        return None
    finally:
        prober.finish()
    pair.power_scope = prober.scope or "board"
    pair.device_time_s = prober.loaded_s
    return pair


def _add_pair(doc: Dict[str, Any], dev: Any, pair: Any) -> None:
    """The pair's keys: ``ppw_optimal_clock_mhz`` and ``ppw_optimal_mem_clock_mhz`` name the
    pair (null memory clock on a board with one); ``ppw_optimal_clock_at_default_mem_mhz``
    is the core calibration's clock at the default memory clock (the profile's, which the
    policies use while the memory clock stays at its default)."""
    doc["ppw_optimal_clock_at_default_mem_mhz"] = doc["ppw_optimal_clock_mhz"]
    doc["supported_mem_clocks_mhz"] = list(dev.supported_mem_clocks_mhz())
    if pair is None:
        doc["ppw_optimal_mem_clock_mhz"] = None
        doc["pair_search"] = None
        return
    doc["ppw_optimal_clock_mhz"] = pair.clock_mhz
    doc["ppw_optimal_mem_clock_mhz"] = pair.mem_clock_mhz
    doc["pair_search"] = pair.to_dict()


def _save_pair(board: str, load_name: str, pair: Any) -> None:
    """Keep the pair in the board's profile (``tuning.ppw-pair.<load>``) beside the core
    calibration, which the policies use while they set the core clock alone."""
    from governor.profiles.store import put_tuning

    put_tuning(board, "ppw-pair", load_name, pair.to_dict())


def _keep_raw(dev, data) -> str:
    """Save what a failed calibration measured, so nothing is lost; returns the path."""
    import datetime as dt
    import json

    from governor.cli.common import to_jsonable
    from governor.paths import data_dir
    from governor.profiles.profile import board_key

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = data_dir() / "failed" / f"{board_key(dev)}-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(to_jsonable({"device": dev.uri, "data": data}), indent=2) + "\n",
        encoding="utf-8",
    )
    return str(path)


def _document(dev, result, load_info, profile_path, plot_path, note) -> Dict[str, Any]:
    clocks = result.supported_clocks_mhz
    top = clocks[-1]
    e_opt = result.energy_per_unit_j(result.ppw_optimal_clock_mhz)
    e_top = result.energy_per_unit_j(top)
    t_opt = result.time_per_unit_s(result.ppw_optimal_clock_mhz)
    t_top = result.time_per_unit_s(top)
    finite = lambda v: v if v == v else None  # noqa: E731  (NaN: no model, no value)
    return {
        "device": dev.uri,
        "device_name": dev.identity.name,
        "simulated": dev.identity.kind == "sim",
        "note": note,
        "load": load_info,
        "method": result.method,
        "warnings": list(result.warnings),
        "ridge_clock_mhz": finite(result.ridge_clock_mhz),
        "ppw_optimal_clock_mhz": result.ppw_optimal_clock_mhz,
        "model_optimum_mhz": finite(result.predicted_optimum_mhz),
        "optimum_interval": None
        if result.optimum_interval is None
        else result.optimum_interval.to_dict(),
        "flat": {"clocks_mhz": list(result.flat_clocks_mhz), "band_rel": result.noise_band_rel}
        if result.flat
        else None,
        "ridge_interval_mhz": list(result.power_model.ridge_interval_mhz)
        if result.modelled
        else None,
        "probes": len(result.probes),
        "probe_clocks_mhz": result.probe_clocks_mhz,
        "device_time_s": result.device_time_s,
        "idle_power_w": result.idle_power_w,
        "model": {"power": result.power_model.to_dict(), "time": result.time_model.to_dict()}
        if result.modelled
        else None,
        "energy_saving_vs_top_clock_pct": 100.0 * (1.0 - e_opt / e_top),
        "slowdown_vs_top_clock_pct": 100.0 * (t_opt / t_top - 1.0),
        "points": [p.to_dict() for p in result.probes],
        "notes": result.notes,
        "profile_path": str(profile_path) if profile_path else None,
        "plot_path": str(plot_path) if plot_path else None,
        "skipped": False,
    }


def _print(doc: Dict[str, Any], result) -> None:
    from rich.table import Table

    from governor.cli.common import console as console_

    console = console_()
    table = Table(title=f"{doc['device_name']} — load: {doc['load']['name']}")
    for col in ("clock MHz", "measured MHz", "power W", "time/unit s", "energy/unit J", "status"):
        table.add_column(col, justify="right")
    best = doc["ppw_optimal_clock_at_default_mem_mhz"]
    for p in sorted(result.probes, key=lambda p: p.requested_mhz):
        mark = " ◀" if p.requested_mhz == best else ""
        table.add_row(
            f"{p.requested_mhz:g}",
            f"{p.clock_mhz:.1f}",
            f"{p.power_w:.2f}",
            f"{p.time_per_unit_s:.4g}",
            f"{p.energy_per_unit_j:.4g}",
            p.status + mark,
        )
    console.print(table)
    if result.modelled:
        lo, hi = result.power_model.ridge_interval_mhz
        ridge = f"{doc['ridge_clock_mhz']:.0f} MHz"
        if lo == lo and hi == hi:  # NaN: no points to place it
            ridge += f"  (90 % interval {lo:.0f}-{hi:.0f} MHz)"
        console.print(f"ridge clock            {ridge}")
    else:
        console.print("method                 best-probe (no model explained the measurements)")
    console.print(
        f"PPW-optimal clock      [bold]{best:g} MHz[/bold]  "
        f"({doc['energy_saving_vs_top_clock_pct']:.1f} % less energy per unit than the top clock, "
        f"{doc['slowdown_vs_top_clock_pct']:.1f} % slower)"
    )
    pair = doc.get("pair_search")
    if pair:
        console.print(
            f"PPW-optimal pair       [bold]{pair['clock_mhz']:g} MHz core, "
            f"{pair['mem_clock_mhz']:g} MHz memory[/bold]  ({100 * pair['saving_rel']:.1f} % "
            f"less {pair['power_scope']} energy per unit than {best:g} MHz at the default "
            f"{pair['default_mem_clock_mhz']:g} MHz memory; {len(pair['probes'])} pair probes, "
            f"{pair['device_time_s']:.1f} s under load)"
        )
    interval = doc.get("optimum_interval")
    if interval:
        lo, hi = interval["low_mhz"], interval["high_mhz"]
        span = f"{lo:g} MHz" if lo == hi else f"{lo:g}-{hi:g} MHz"
        console.print(
            f"optimum interval       {span}  ({100 * interval['level']:.0f} %: clocks whose "
            f"energy is within {100 * interval['band_rel']:.1f} % of the best)"
        )
    console.print(
        f"probes                 {doc['probes']} clocks, {doc['device_time_s']:.1f} s of device time under load"
    )
    for note in doc["notes"]:
        console.print(f"note: {note}")
    if doc["profile_path"]:
        console.print(f"profile                {doc['profile_path']}")
    if doc["plot_path"]:
        console.print(f"plot                   {doc['plot_path']}")


class _Progress:
    """A rich progress bar on stderr while probing (only on a terminal)."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.total = total
        self._progress: Optional[Progress] = None
        self._task: Optional[TaskID] = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.progress import BarColumn, Progress, TextColumn

            from governor.cli.common import console as console_

            self._progress = Progress(
                TextColumn("probing"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} {task.description}"),
                console=console_(stderr=True),
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("", total=self.total)
        return self

    def update(self, n: int, probe: Probe) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task,
                completed=n,
                description=f"{probe.requested_mhz:g} MHz: {probe.power_w:.1f} W",
            )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()
