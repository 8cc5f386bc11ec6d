"""Board profiles: what calibration found, kept per board in a versioned JSON file.

A profile holds the board fingerprint, the fitted models with uncertainties, the raw probes,
the ridge and PPW-optimal clocks, the load used, provenance (versions, date) and the tuning
caches. Calibrations with different loads are kept side by side under ``"workloads"``; the
top-level model and clocks are those of the built-in (compute-bound) load, or of the first
load calibrated when there is none::

    {"schema_version": 1, "board": "agx-orin", "fingerprint": {...},
     "ppw_optimal_clock_mhz": 918.0, "ridge_clock_mhz": 1002.0,
     "power_model": {...}, "time_model": {...}, "probes": [...],
     "workloads": {"builtin": {...}, "memory": {...}}, "tuning": {...}}
"""

from __future__ import annotations

import datetime as _dt
import math
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from governor._compat import json_loads
from governor._version import __version__
from governor.devices.base import Device
from governor.errors import ProfileError
from governor.paths import shipped_profiles_dir
from governor.profiles.schema import check_calibrated, check_clocks_for, salvage
from governor.profiles.store import (
    SCHEMA_VERSION,
    parse_profile,
    profile_paths,
    read_profile_file,
    user_profiles_dir,
    write_profile_file,
)

__all__ = [
    "board_key",
    "build_profile",
    "check_fingerprint",
    "check_profile_for",
    "existing_profile",
    "find_profile",
    "fingerprint",
    "invalid_profile",
    "list_profiles",
    "load_profile_for",
    "lookup_profile_for",
    "ppw_pair",
    "save_calibration",
]


def board_key(device: Device) -> str:
    """The profile name of a device: its catalog model, made file-safe."""
    key = re.sub(r"[^A-Za-z0-9_.+-]+", "-", device.identity.model).strip("-.")
    return key or "unknown-board"


def fingerprint(device: Device) -> Dict[str, Any]:
    ident = device.identity
    return {
        "model": ident.model,
        "name": ident.name,
        "kind": ident.kind,
        "serial": ident.serial,
        "uuid": ident.uuid,
        "driver_version": ident.driver_version,
        "l4t_version": ident.l4t_version,
        "supported_clocks_mhz": list(device.supported_clocks_mhz()),
    }


def _versions() -> Dict[str, str]:
    import numpy
    import scipy

    return {
        "governor": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
    }


def _finite_or_none(value: Any) -> Any:
    """A best-probe calibration has no ridge or model optimum: null in the file, not NaN."""
    try:
        return value if math.isfinite(float(value)) else None
    except (TypeError, ValueError):
        return None


def _interval_doc(result: Any) -> Optional[Dict[str, Any]]:
    interval = getattr(result, "optimum_interval", None)
    return None if interval is None else interval.to_dict()


def _calibration_entry(result: Any, load: Dict[str, str], created: str) -> Dict[str, Any]:
    return {
        "load": load,
        "created": created,
        "device_uri": result.device_uri,
        "ppw_optimal_clock_mhz": result.ppw_optimal_clock_mhz,
        "ridge_clock_mhz": _finite_or_none(result.ridge_clock_mhz),
        "predicted_optimum_mhz": _finite_or_none(result.predicted_optimum_mhz),
        "optimum_interval": _interval_doc(result),
        "idle_power_w": result.idle_power_w,
        "device_time_s": result.device_time_s,
        "method": getattr(result, "method", "model"),
        "power_model": None if result.power_model is None else result.power_model.to_dict(),
        "time_model": None if result.time_model is None else result.time_model.to_dict(),
        "probes": [p.to_dict() for p in result.probes],
        "notes": list(result.notes),
        "warnings": list(getattr(result, "warnings", [])),
    }


def _workload_key(load: Dict[str, str]) -> str:
    """The ``workloads`` entry a calibration with ``load`` writes."""
    if load.get("kind") == "command":
        return "command:" + load.get("name", "")
    return load.get("kind", "builtin")


def ppw_pair(
    doc: Mapping[str, Any], workload: Optional[str] = None
) -> Optional[Tuple[float, float]]:
    """The (core, memory) clock pair with the least board energy per unit (MHz) that
    ``governor calibrate`` kept for the load of ``doc``'s calibration (``workload``: one of
    its ``workloads`` entries; None: the profile's own), or None where it kept none (a
    board with one memory clock, or one whose memory clock it could not set).

    The pair lives in ``tuning.ppw-pair.<load name>``; only the pair of the same load as
    the calibration is its pair.

    Raises:
        ProfileError: the pair is there but its clocks are not positive numbers.
    """
    entry: Any = doc if workload is None else (doc.get("workloads") or {}).get(workload)
    load = entry.get("load") if isinstance(entry, Mapping) else None
    name = load.get("name") if isinstance(load, Mapping) else None
    pairs = (doc.get("tuning") or {}).get("ppw-pair") or {}
    if not name or not isinstance(pairs, Mapping) or name not in pairs:
        return None
    pair = pairs[name]
    try:
        core, mem = float(pair["clock_mhz"]), float(pair["mem_clock_mhz"])
    except (KeyError, TypeError, ValueError):
        core = mem = float("nan")
    if not (math.isfinite(core) and math.isfinite(mem) and core > 0 and mem > 0):
        raise ProfileError(f"tuning.ppw-pair.{name} must hold positive clock_mhz and mem_clock_mhz")
    return core, mem


def build_profile(
    device: Device, result: Any, load: Dict[str, str], existing: Optional[Dict[str, Any]] = None
) -> Dict[str, Any]:
    """The profile document after a calibration, merged into ``existing`` (kept: other loads'
    calibrations and the tuning caches)."""
    created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    doc: Dict[str, Any] = dict(existing or {})
    workloads = dict(doc.get("workloads") or {})
    key = _workload_key(load)
    workloads[key] = _calibration_entry(result, load, created)
    primary = workloads.get("builtin") or workloads[key]
    doc.update(
        {
            "schema_version": SCHEMA_VERSION,
            "board": board_key(device),
            "fingerprint": fingerprint(device),
            "created": created,
            "provenance": {"source": "governor calibrate", "versions": _versions()},
            "method": primary.get("method", "model"),
            "ppw_optimal_clock_mhz": primary["ppw_optimal_clock_mhz"],
            "ridge_clock_mhz": primary["ridge_clock_mhz"],
            "power_model": primary["power_model"],
            "time_model": primary["time_model"],
            "load": primary["load"],
            "probes": primary["probes"],
            "workloads": workloads,
        }
    )
    doc.setdefault("tuning", {})
    return doc


def validate(doc: Dict[str, Any], path: Any) -> Dict[str, Any]:
    """Check a parsed profile has what governor relies on from a calibration (the rules of
    :mod:`governor.profiles.schema`, and ``board``, ``fingerprint``, ``ppw_optimal_clock_mhz``,
    ``power_model`` present).

    Raises:
        ProfileError: a required field is missing or one breaks a rule (names file and field).
    """
    return check_calibrated(doc, path)


def find_profile(board: str) -> Optional[Tuple[Path, Dict[str, Any]]]:
    """The first profile of ``board`` (user's, then shipped), validated; None if none."""
    for path in profile_paths(board):
        if path.exists():
            doc = read_profile_file(path)
            if "power_model" not in doc and "tuning" in doc:
                continue  # a tuning-only cache, not a calibration
            return path, validate(doc, path)
    return None


def _tuning_only(board: str) -> Optional[Path]:
    """The first profile file of ``board`` that holds tuning tables but no calibration."""
    for path in profile_paths(board):
        if path.exists():
            try:
                doc = read_profile_file(path)
            except ProfileError:
                return None
            return path if "power_model" not in doc and "tuning" in doc else None
    return None


def check_fingerprint(
    doc: Dict[str, Any], device: Device, path: Any = None, *, force: bool = False
) -> List[str]:
    """Refuse a profile made on another board; returns warnings for lesser mismatches.

    Raises:
        ProfileError: the model or clock table differs (unless ``force``).
    """
    fp = doc.get("fingerprint") or {}
    mine = fingerprint(device)
    problems = []
    if fp.get("model") != mine["model"]:
        problems.append(f"it was made on {fp.get('model')!r}, this device is {mine['model']!r}")
    if fp.get("kind") == "sim" and mine["kind"] != "sim":
        problems.append("it was calibrated on a simulated board, not on this hardware")
    theirs = [float(c) for c in fp.get("supported_clocks_mhz") or []]
    if len(theirs) != len(mine["supported_clocks_mhz"]) or any(
        abs(a - b) > 0.5 for a, b in zip(theirs, mine["supported_clocks_mhz"])
    ):
        problems.append("its clock table differs from this device's")
    if problems and not force:
        raise ProfileError(
            "profile is for another board: "
            + "; ".join(problems)
            + " (use --force to use it anyway)",
            path,
        )
    warnings = list(problems)
    for key in ("serial", "uuid"):
        if fp.get(key) and mine.get(key) and fp.get(key) != mine.get(key):
            warnings.append(f"calibrated on another unit of this board ({key} {fp.get(key)})")
    return warnings


def load_profile_for(
    device: Device, *, force: bool = False
) -> Tuple[Path, Dict[str, Any], List[str]]:
    """The profile for ``device`` with its path and warnings, checked against the device: its
    fingerprint (unless ``force``) and its PPW-optimal and ridge clocks within the device's
    supported range (always).

    Raises:
        ProfileError: none exists (says to run ``governor calibrate``), malformed, another
            board's, or with clocks outside the device's range.
    """
    found = find_profile(board_key(device))
    if found is None:
        raise ProfileError(
            f"no profile for {device.identity.model}: run 'governor calibrate --device {device.uri}' first"
        )
    path, doc = found
    warnings = check_fingerprint(doc, device, path, force=force)
    check_clocks_for(doc, device.supported_clocks_mhz(), path)
    return path, doc, warnings


def lookup_profile_for(
    device: Device,
) -> Tuple[Optional[Path], Optional[Dict[str, Any]], List[str]]:
    """For callers that fall back to a generic model: ``(path, doc, warnings)`` of the
    device's profile, or ``(None, None, [why])`` when there is none for this board or it was
    made on another board (a fact to report, not a failure).

    Raises:
        ProfileError: the profile is malformed, or its clocks lie outside the device's range.
    """
    found = find_profile(board_key(device))
    if found is None:
        tables = _tuning_only(board_key(device))
        if tables is not None:  # kernel or tile tables, but no calibration
            return None, None, [f"the profile of {device.identity.model} ({tables}) holds "
                                "tuning tables but no calibration"]  # fmt: skip
        return None, None, [f"no profile for {device.identity.model}"]
    path, doc = found
    try:
        warnings = check_fingerprint(doc, device, path)
    except ProfileError as err:
        return None, None, [str(err).replace(" (use --force to use it anyway)", "")]
    check_clocks_for(doc, device.supported_clocks_mhz(), path)
    return path, doc, warnings


def check_profile_for(doc: Dict[str, Any], device: Device, path: Any = None) -> Dict[str, Any]:
    """A profile given by the caller (a dict or a file's contents) checked for ``device``:
    the schema's rules, a calibration's fields, and clocks within the device's range.

    Raises:
        ProfileError: malformed or with clocks outside the range (names file and field).
    """
    check_calibrated(doc, path)
    check_clocks_for(doc, device.supported_clocks_mhz(), path)
    return doc


def save_calibration(
    device: Device, result: Any, load: Dict[str, str], notes: Optional[List[str]] = None
) -> Path:
    """Write (or update) the user's profile of ``device`` with ``result``. Returns its path.

    Merged into the existing profile (other loads' calibrations and tuning caches kept). An
    existing profile that breaks the schema's rules is no dead end: its valid parts are
    merged into, the old file is copied aside (``<board>.json.invalid-<UTC stamp>-<pid>``)
    and one line saying so is appended to ``notes``.

    Raises:
        ProfileError: the existing file is unreadable or of a newer schema (nothing written),
            or the new document breaks a rule (a bug; nothing written).
    """
    user_path = profile_paths(board_key(device))[0]
    base = _merge_base(device, _workload_key(load))
    doc = build_profile(device, result, load, base.doc)
    aside = _copy_aside(user_path) if base.problem else None
    try:
        write_profile_file(user_path, doc)
    except ProfileError:
        if aside is not None:
            aside.unlink()
        raise
    if aside is not None and notes is not None:
        notes.append(base.describe(aside, _workload_key(load)))
    return user_path


@dataclass(frozen=True)
class _MergeBase:
    """What a calibration merges into: ``doc`` (None: start afresh) and, for a profile that
    broke a rule, the ``problem`` and the parts ``dropped``."""

    doc: Optional[Dict[str, Any]]
    problem: Optional[str] = None
    dropped: Tuple[str, ...] = ()

    def describe(self, aside: Path, replaced: str) -> str:
        """One line: what was wrong, where the old file went, what the new one kept from it
        (other loads' calibrations than the ``replaced`` one, tuning caches)."""
        doc = self.doc or {}
        kept = sorted(
            [f"workloads.{k}" for k in doc.get("workloads") or {} if k != replaced]
            + [f"tuning.{k}" for k in doc.get("tuning") or {}]
        )
        return (
            f"{self.problem}; set it aside as {aside.name} and wrote a new one"
            + (f" keeping {', '.join(kept)}" if kept else "")
            + (f" (left out: {', '.join(self.dropped)})" if self.dropped else "")
        )


def _copy_aside(path: Path) -> Path:
    """Copy ``path`` beside itself with a UTC timestamp, before it is replaced."""
    import os
    import shutil

    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.invalid-{stamp}-{os.getpid()}")
    shutil.copyfile(str(path), str(aside))
    return aside


def _merge_base(device: Device, replacing: str = "") -> _MergeBase:
    """The user's profile of ``device``'s board as a calibration finds it (see
    :func:`existing_profile`); a file that is not a profile (not JSON, not an object) leaves
    nothing to keep, one that breaks a rule keeps the parts that do not (schema.salvage).
    ``replacing``: the ``workloads`` entry the calibration writes.

    Raises:
        ProfileError: the file cannot be read, or is of a newer schema than this governor's.
    """
    user_path = profile_paths(board_key(device))[0]
    if not user_path.exists():
        return _MergeBase(None)
    try:
        data = user_path.read_bytes()
    except OSError as err:
        raise _refusal(
            ProfileError(f"cannot read profile: {err.strerror or err}", user_path)
        ) from err
    problem: Optional[str] = None
    try:
        existing: Any = parse_profile(data, user_path)
    except ProfileError as err:
        problem = str(err)
        try:
            existing = json_loads(data.decode("utf-8"))
        except (UnicodeDecodeError, RecursionError, ValueError):
            return _MergeBase(None, problem, ("the whole file",))
    clocks = device.supported_clocks_mhz()
    try:
        kept, dropped = salvage(existing, clocks)
    except ProfileError as newer:
        raise _refusal(
            ProfileError(str(newer).replace("profile (given)", "profile"), user_path)
        ) from None
    theirs = kept.get("fingerprint")  # None: only tuning caches so far
    if theirs and (
        theirs.get("model") != device.identity.model
        or (theirs.get("kind") == "sim") != (device.identity.kind == "sim")
    ):
        # another board's (or a simulation's) file: start afresh (an invalid one set aside)
        return _MergeBase(None, problem, ("the whole file",) if problem else ())
    # a valid file made with another clock table: what lies outside this one is set aside,
    # unless the new calibration replaces it anyway (the top level, the load calibrated)
    replaced = ("the top-level calibration", f"workloads.{replacing}")
    if problem is None and any(part not in replaced for part in dropped):
        problem = (
            f"profile {user_path}: {', '.join(dropped)} lie outside this device's clock "
            f"table ({min(clocks):g}-{max(clocks):g} MHz)"
        )
    return _MergeBase(kept, problem, tuple(dropped))


def _refusal(err: ProfileError) -> ProfileError:
    refused = ProfileError(
        f"{err}; fix or remove it to calibrate (it may hold other loads' calibrations "
        "and tuning caches)"
    )
    refused.path = err.path
    return refused


def existing_profile(device: Device) -> Optional[Dict[str, Any]]:
    """The user's profile of ``device``'s board that a new calibration merges into: None when
    there is none or it was made on another board (or on a simulation of it: replaced). A
    profile that breaks a rule gives its valid parts (:func:`save_calibration` then sets the
    file aside).

    Raises:
        ProfileError: the file is unreadable or of a newer schema; nothing is merged into (or
            thrown over) it until it is fixed or removed, which the message says.
    """
    return _merge_base(device).doc


def invalid_profile(device: Device) -> Optional[str]:
    """Why the user's profile of ``device``'s board breaks the schema (one line), or None
    when it is valid or absent. A calibration replaces such a profile's invalid parts.

    Raises:
        ProfileError: the file is unreadable or of a newer schema.
    """
    return _merge_base(device).problem


def list_profiles() -> List[Dict[str, Any]]:
    """Every profile governor can see: user's first, then shipped ones not overridden."""
    rows: List[Dict[str, Any]] = []
    seen = set()
    for source, folder in (("user", user_profiles_dir()), ("shipped", shipped_profiles_dir())):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.json")):
            board = path.stem
            row: Dict[str, Any] = {
                "board": board,
                "path": str(path),
                "source": source,
                "overridden": board in seen,
            }
            try:
                doc = read_profile_file(path)
                row.update(
                    ppw_optimal_clock_mhz=doc.get("ppw_optimal_clock_mhz"),
                    ridge_clock_mhz=doc.get("ridge_clock_mhz"),
                    created=doc.get("created"),
                    workloads=sorted((doc.get("workloads") or {}).keys()),
                    tuning=sorted((doc.get("tuning") or {}).keys()),
                )
            except ProfileError as err:
                row["error"] = str(err)
            rows.append(row)
            seen.add(board)
    return rows
