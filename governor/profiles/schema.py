"""The rules a profile document must follow, checked once where it is read.

:func:`check_document` runs inside :func:`governor.profiles.store.read_profile_file`, so every
profile that reaches code has been checked; a bad one is a one-line :class:`ProfileError`
naming the file and the field::

    profile /home/me/.local/share/governor/profiles/agx-orin.json:
        workloads.memory.ppw_optimal_clock_mhz must be a finite number, not 'fast'

(one line in reality). The rules, for every field that is present:

- numbers are JSON numbers (not strings, not booleans) and finite; clocks, times and powers
  are positive (``p_idle_w``, ``beta_per_mhz``, ``t_mem_s``, ``c_s_mhz`` may be 0; a model's
  ``ridge_clock_mhz`` is >= 0); counts are non-negative integers; a fit's ``uncertainty``
  values are numbers or null (NaN allowed: a fit may not estimate one);
- ``power_model`` has ``p_idle_w``, ``alpha_w_per_mhz`` (> 0), ``ridge_clock_mhz``,
  ``beta_per_mhz`` and an optional ``p_max_w`` (null: no cap), the fields of
  :meth:`governor.models.power.PowerModel.to_dict`;
- ``time_model`` has ``t_mem_s`` and ``c_s_mhz`` (not both 0) and an optional ``k`` >= 1, the
  fields of :meth:`governor.models.time.TimeModel.to_dict`;
- ``fingerprint.supported_clocks_mhz`` is a non-empty list of positive clocks, and the
  profile's PPW-optimal and ridge clocks lie within its range;
- each ``workloads`` entry is a whole calibration: ``power_model`` and
  ``ppw_optimal_clock_mhz`` at least, under the same rules as the top level;
- ``tuning`` maps sections to objects; the ``tiles`` entries (``tuning/eatss``) hold
  ``tiles``: {loop: positive integer}; the ``blocks`` entries (``tuning/blocks``) hold
  ``blocks``: a list of [x, y, z] positive integers and ``clock_mhz``: a clock or null; the
  ``online_ppw`` entries (the PPW clock ``--policy ppw`` found online, per workload) hold
  ``clock_mhz``: a positive clock; the ``kernel_configs`` entries (``governor kernels table``)
  hold ascending positive ``clocks_mhz``, ``configs`` (each a ``tile`` of positive integers and
  a ``thread_block`` of three positive integers, at most 1024 threads) and one ``index`` into
  ``configs`` per clock; with a memory axis (optional: tables written before it have none)
  also ascending positive ``mem_clocks_mhz``, ``default_mem_clock_mhz`` among them and
  ``mem_index``, one row per memory clock of one index per clock (its default row equal to
  ``index``), and optionally ``mem_energy_j`` of the same shape; the other sections' entries
  are checked by the code that reads them.

:func:`check_calibrated` adds what a calibration must have (``board``, ``fingerprint``,
``ppw_optimal_clock_mhz``, ``power_model``); :func:`check_clocks_for` checks a profile's
clocks against a device's clock table. Pure Python: the runtime reads profiles too.
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from governor.documents import show as _show
from governor.errors import ProfileError

__all__ = [
    "CLOCK_TOLERANCE_MHZ",
    "check_calibrated",
    "check_clocks_for",
    "check_document",
    "salvage",
]

#: how far (MHz) a profile's clock may lie outside a clock table's range (Jetson 1300.5 ...)
CLOCK_TOLERANCE_MHZ = 0.5
SCHEMA_VERSION = 1

#: how a calibration found its clock: a fitted model, or (when none explained the data) the
#: best measured probe, which has no power or time model
METHODS = ("model", "best-probe")


def _needed(entry: Mapping[str, Any]) -> Tuple[str, ...]:
    """The fields a calibration entry must have, by its method."""
    if entry.get("method", "model") == "best-probe":
        return ("ppw_optimal_clock_mhz", "probes")
    return ("power_model", "ppw_optimal_clock_mhz")


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.:+/@-]{1,60}$")
_NUMBER_OR_NULL_PROBE_KEYS = (
    "requested_mhz",
    "clock_mhz",
    "power_w",
    "time_per_unit_s",
    "energy_per_unit_j",
    "temperature_c",
    "window_s",
)


def _is_number(value: Any) -> bool:
    """A JSON number Python can hold as a float (NaN and infinities included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        float(value)
    except OverflowError:  # an integer literal with hundreds of digits
        return False
    return True


def _key(key: Any) -> str:
    text = str(key)
    return text if _PLAIN_KEY.match(text) else _show(text)


class _Checker:
    def __init__(self, path: Any) -> None:
        self.path = path

    def fail(self, field: str, problem: str) -> ProfileError:
        where = "profile (given)" if self.path is None else f"profile {self.path}"
        err = ProfileError(f"{where}: {field} {problem}")
        err.path = self.path
        return err

    # -- scalars -----------------------------------------------------------------------------
    def number(
        self, value: Any, field: str, *, low: Optional[float] = None, strict: bool = False
    ) -> float:
        """A finite number, >= ``low`` (> ``low`` when ``strict``)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(field, f"must be a finite number, not {_show(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise self.fail(field, f"must be a finite number, not {_show(value)}") from None
        if not math.isfinite(number):
            raise self.fail(field, f"must be a finite number, not {_show(value)}")
        if low is not None and (number <= low if strict else number < low):
            what = "positive" if (strict and low == 0) else f"{'>' if strict else '>='} {low:g}"
            raise self.fail(field, f"must be {what}, not {_show(value)}")
        return number

    def positive(self, value: Any, field: str) -> float:
        return self.number(value, field, low=0.0, strict=True)

    def nonnegative(self, value: Any, field: str) -> float:
        return self.number(value, field, low=0.0)

    def count(self, value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(field, f"must be a non-negative integer, not {_show(value)}")
        return value

    def text(self, value: Any, field: str, *, null: bool = False) -> None:
        if value is None and null:
            return
        if not isinstance(value, str):
            raise self.fail(field, f"must be a string, not {_show(value)}")

    def flag(self, value: Any, field: str) -> None:
        if not isinstance(value, bool):
            raise self.fail(field, f"must be true or false, not {_show(value)}")

    def obj(self, value: Any, field: str) -> Dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(field, f"must be an object, not {_show(value)}")
        return value

    def array(self, value: Any, field: str) -> List[Any]:
        if not isinstance(value, list):
            raise self.fail(field, f"must be a list, not {_show(value)}")
        return value

    def required(self, doc: Mapping[str, Any], keys: Sequence[str], prefix: str) -> None:
        for key in keys:
            if key not in doc:
                raise self.fail(prefix + key, "is missing")

    # -- sections ----------------------------------------------------------------------------
    def uncertainty(self, value: Any, field: str, *, null: bool = True) -> None:
        for key, v in self.obj(value, field).items():
            if v is None and null:
                continue
            if not _is_number(v):
                wanted = "a number or null" if null else "a number"
                raise self.fail(f"{field}.{_key(key)}", f"must be {wanted}, not {_show(v)}")

    def power_model(self, value: Any, field: str) -> None:
        pm = self.obj(value, field)
        p = field + "."
        self.required(pm, ("p_idle_w", "alpha_w_per_mhz", "ridge_clock_mhz", "beta_per_mhz"), p)
        self.nonnegative(pm["p_idle_w"], p + "p_idle_w")
        self.positive(pm["alpha_w_per_mhz"], p + "alpha_w_per_mhz")
        self.nonnegative(pm["ridge_clock_mhz"], p + "ridge_clock_mhz")
        self.nonnegative(pm["beta_per_mhz"], p + "beta_per_mhz")
        if pm.get("p_max_w") is not None:
            self.positive(pm["p_max_w"], p + "p_max_w")
        for key in ("residual_rms_w", "max_rel_residual"):
            if key in pm:
                self.nonnegative(pm[key], p + key)
        for key in ("n_points", "n_capped"):
            if key in pm:
                self.count(pm[key], p + key)
        if "ridge_reached" in pm:
            self.flag(pm["ridge_reached"], p + "ridge_reached")
        if "form" in pm:
            self.text(pm["form"], p + "form")
        if pm.get("uncertainty") is not None:
            self.uncertainty(pm["uncertainty"], p + "uncertainty")
        if pm.get("ridge_interval_mhz") is not None:
            bounds = self.array(pm["ridge_interval_mhz"], p + "ridge_interval_mhz")
            if len(bounds) != 2:
                raise self.fail(p + "ridge_interval_mhz", "must be [low, high]")
            for i, bound in enumerate(bounds):
                if bound is not None:
                    self.nonnegative(bound, f"{p}ridge_interval_mhz[{i}]")
        if pm.get("interval_level") is not None:
            self.number(pm["interval_level"], p + "interval_level", low=0.0)

    def optimum_interval(self, value: Any, field: str) -> None:
        doc = self.obj(value, field)
        p = field + "."
        self.required(doc, ("low_mhz", "high_mhz"), p)
        low = self.positive(doc["low_mhz"], p + "low_mhz")
        high = self.positive(doc["high_mhz"], p + "high_mhz")
        if low > high:
            raise self.fail(field, f"has low_mhz {low:g} above high_mhz {high:g}")
        for key in ("band_rel", "held_out_rel_error"):
            if doc.get(key) is not None:
                self.nonnegative(doc[key], p + key)
        if doc.get("level") is not None:
            self.number(doc["level"], p + "level", low=0.0)

    def time_model(self, value: Any, field: str) -> None:
        tm = self.obj(value, field)
        p = field + "."
        self.required(tm, ("t_mem_s", "c_s_mhz"), p)
        t_mem = self.nonnegative(tm["t_mem_s"], p + "t_mem_s")
        c = self.nonnegative(tm["c_s_mhz"], p + "c_s_mhz")
        if t_mem == 0 and c == 0:
            raise self.fail(field, "has t_mem_s and c_s_mhz both 0: no time per unit of work")
        if "k" in tm:
            self.number(tm["k"], p + "k", low=1.0)
        if "max_rel_residual" in tm:
            self.nonnegative(tm["max_rel_residual"], p + "max_rel_residual")
        if "form" in tm:
            self.text(tm["form"], p + "form")
        if "kind" in tm:
            self.text(tm["kind"], p + "kind", null=True)
        # the low-clock term and the fit's figures (null where the fit had none)
        for key in ("low_s", "low_exp", "loo_rel_error", "memory_bound_share"):
            if tm.get(key) is not None:
                self.nonnegative(tm[key], p + key)
        for key in ("low_ref_mhz", "top_clock_mhz"):
            if tm.get(key) is not None:
                self.positive(tm[key], p + key)
        if tm.get("uncertainty") is not None:
            self.uncertainty(tm["uncertainty"], p + "uncertainty", null=False)

    def fingerprint(self, value: Any, field: str) -> List[float]:
        fp = self.obj(value, field)
        p = field + "."
        self.required(fp, ("supported_clocks_mhz",), p)
        clocks = self.array(fp["supported_clocks_mhz"], p + "supported_clocks_mhz")
        if not clocks:
            raise self.fail(p + "supported_clocks_mhz", "is empty")
        table = [self.positive(c, f"{p}supported_clocks_mhz[{i}]") for i, c in enumerate(clocks)]
        for key in ("model", "name", "kind", "serial", "uuid", "driver_version", "l4t_version"):
            if key in fp:
                self.text(fp[key], p + key, null=True)
        return table

    def probes(self, value: Any, field: str) -> None:
        for i, probe in enumerate(self.array(value, field)):
            entry = self.obj(probe, f"{field}[{i}]")
            for key in _NUMBER_OR_NULL_PROBE_KEYS:
                v = entry.get(key)
                if v is not None and not _is_number(v):
                    raise self.fail(
                        f"{field}[{i}].{key}", f"must be a number or null, not {_show(v)}"
                    )

    def best_probes(self, value: Any, field: str) -> None:
        """A best-probe calibration answers from its probes: they must be there and usable."""
        rows = self.array(value, field)
        if not rows:
            raise self.fail(field, "must list the measured probes of a best-probe calibration")
        for i, probe in enumerate(rows):
            entry = self.obj(probe, f"{field}[{i}]")
            for key in ("requested_mhz", "power_w", "time_per_unit_s"):
                self.positive(entry.get(key), f"{field}[{i}].{key}")

    def load(self, value: Any, field: str) -> None:
        for key, v in self.obj(value, field).items():
            self.text(v, f"{field}.{_key(key)}", null=True)

    def calibration(
        self, entry: Mapping[str, Any], prefix: str, table: Optional[List[float]]
    ) -> None:
        """The fields a calibration has, at the top level (prefix "") or in a workload."""
        if "ppw_optimal_clock_mhz" in entry:
            self.positive(entry["ppw_optimal_clock_mhz"], prefix + "ppw_optimal_clock_mhz")
        method = entry.get("method", "model")
        if method not in METHODS:
            raise self.fail(
                prefix + "method", f"must be one of {', '.join(METHODS)}, not {_show(method)}"
            )
        # a best-probe calibration has no model, so no ridge or model optimum: null
        for key in ("ridge_clock_mhz", "predicted_optimum_mhz"):
            if key in entry and (entry[key] is not None or method != "best-probe"):
                self.positive(entry[key], prefix + key)
        if method == "best-probe":
            self.best_probes(entry.get("probes"), prefix + "probes")
        if "warnings" in entry:
            for i, text in enumerate(self.array(entry["warnings"], prefix + "warnings")):
                self.text(text, f"{prefix}warnings[{i}]")
        if entry.get("idle_power_w") is not None:
            self.nonnegative(entry["idle_power_w"], prefix + "idle_power_w")
        if "device_time_s" in entry:
            self.nonnegative(entry["device_time_s"], prefix + "device_time_s")
        if "power_model" in entry and (entry["power_model"] is not None or method != "best-probe"):
            self.power_model(entry["power_model"], prefix + "power_model")
        if entry.get("time_model") is not None:
            self.time_model(entry["time_model"], prefix + "time_model")
        if entry.get("optimum_interval") is not None:
            self.optimum_interval(entry["optimum_interval"], prefix + "optimum_interval")
        if "probes" in entry:
            self.probes(entry["probes"], prefix + "probes")
        if "load" in entry:
            self.load(entry["load"], prefix + "load")
        for key in ("created", "device_uri"):
            if key in entry:
                self.text(entry[key], prefix + key, null=True)
        if "notes" in entry:
            for i, note in enumerate(self.array(entry["notes"], prefix + "notes")):
                self.text(note, f"{prefix}notes[{i}]")
        if table:
            self.clocks_within(entry, prefix, table, "the profile's own clock table")

    def clocks_within(
        self, entry: Mapping[str, Any], prefix: str, table: Sequence[float], whose: str
    ) -> None:
        lo, hi = min(table), max(table)
        for key in ("ppw_optimal_clock_mhz", "ridge_clock_mhz"):
            value = entry.get(key)
            if value is None:
                continue
            if not (lo - CLOCK_TOLERANCE_MHZ <= value <= hi + CLOCK_TOLERANCE_MHZ):
                raise self.fail(
                    prefix + key, f"{value:g} MHz is outside {whose} ({lo:g}-{hi:g} MHz)"
                )

    def workloads(self, value: Any, table: Optional[List[float]]) -> None:
        for name, entry in self.obj(value, "workloads").items():
            if not name:
                raise self.fail("workloads", "has an entry with an empty name")
            prefix = f"workloads.{_key(name)}."
            self.obj(entry, prefix[:-1])
            self.required(entry, _needed(entry), prefix)
            self.calibration(entry, prefix, table)

    def tuning(self, value: Any) -> None:
        for section, entries in self.obj(value, "tuning").items():
            field = f"tuning.{_key(section)}"
            self.obj(entries, field)
            if section == "tiles":
                for key, entry in entries.items():
                    self.tiles_entry(entry, f"{field}.{_key(key)}")
            elif section == "blocks":
                for key, entry in entries.items():
                    self.blocks_entry(entry, f"{field}.{_key(key)}")
            elif section == "online_ppw":
                for key, entry in entries.items():
                    self.online_ppw_entry(entry, f"{field}.{_key(key)}")
            elif section == "kernel_configs":
                for key, entry in entries.items():
                    self.kernel_configs_entry(entry, f"{field}.{_key(key)}")

    def kernel_configs_entry(self, value: Any, field: str) -> None:
        entry = self.obj(value, field)
        self.required(entry, ("clocks_mhz", "configs", "index"), field + ".")
        clocks = [
            self.positive(c, f"{field}.clocks_mhz[{i}]")
            for i, c in enumerate(self.array(entry["clocks_mhz"], field + ".clocks_mhz"))
        ]
        if not clocks or clocks != sorted(clocks):
            raise self.fail(field + ".clocks_mhz", "must be a non-empty ascending list")
        configs = self.array(entry["configs"], field + ".configs")
        for i, config in enumerate(configs):
            where = f"{field}.configs[{i}]"
            self.required(self.obj(config, where), ("tile", "thread_block"), where + ".")
            for loop, size in self.obj(config["tile"], where + ".tile").items():
                if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                    raise self.fail(
                        f"{where}.tile.{_key(loop)}",
                        f"must be a positive integer, not {_show(size)}",
                    )
            dims = config["thread_block"]
            if (
                not isinstance(dims, list)
                or len(dims) != 3
                or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims)
                or dims[0] * dims[1] * dims[2] > 1024
            ):
                raise self.fail(
                    where + ".thread_block", "must be 3 positive integers, at most 1024 threads"
                )
        index = self.array(entry["index"], field + ".index")
        if len(index) != len(clocks) or any(
            isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(configs)
            for k in index
        ):
            raise self.fail(field + ".index", "must give one configuration per clock")
        self.kernel_configs_mem_axis(entry, field, len(clocks), len(configs))

    def kernel_configs_mem_axis(
        self, entry: Mapping[str, Any], field: str, n_clocks: int, n_configs: int
    ) -> None:
        """The optional memory axis of a ``kernel_configs`` entry (see the module docstring)."""
        keys = ("mem_clocks_mhz", "default_mem_clock_mhz", "mem_index")
        if not any(k in entry for k in keys + ("mem_energy_j",)):
            return  # a table without the axis
        self.required(entry, keys, field + ".")
        mems = [
            self.positive(m, f"{field}.mem_clocks_mhz[{i}]")
            for i, m in enumerate(self.array(entry["mem_clocks_mhz"], field + ".mem_clocks_mhz"))
        ]
        if len(mems) < 2 or mems != sorted(set(mems)):
            raise self.fail(
                field + ".mem_clocks_mhz", "must be an ascending list of two or more clocks"
            )
        default = self.positive(entry["default_mem_clock_mhz"], field + ".default_mem_clock_mhz")
        if default not in mems:
            raise self.fail(field + ".default_mem_clock_mhz", "must be one of mem_clocks_mhz")
        rows = self.array(entry["mem_index"], field + ".mem_index")
        if len(rows) != len(mems) or any(
            not isinstance(row, list)
            or len(row) != n_clocks
            or any(
                isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n_configs for k in row
            )
            for row in rows
        ):
            raise self.fail(
                field + ".mem_index", "must give one configuration per (memory clock, clock) pair"
            )
        if rows[mems.index(default)] != list(entry["index"]):
            raise self.fail(field + ".mem_index", "at the default memory clock must equal index")
        energies = self.array(entry.get("mem_energy_j", []), field + ".mem_energy_j")
        if energies and (
            len(energies) != len(mems)
            or any(not isinstance(row, list) or len(row) != n_clocks for row in energies)
        ):
            raise self.fail(field + ".mem_energy_j", "must give one energy per pair")
        for i, row in enumerate(energies):
            for k, e in enumerate(row):
                self.nonnegative(e, f"{field}.mem_energy_j[{i}][{k}]")

    def online_ppw_entry(self, value: Any, field: str) -> None:
        entry = self.obj(value, field)
        self.required(entry, ("clock_mhz",), field + ".")
        clock = entry["clock_mhz"]
        if (
            isinstance(clock, bool)
            or not isinstance(clock, (int, float))
            or not math.isfinite(clock)
            or clock <= 0
        ):
            raise self.fail(f"{field}.clock_mhz", f"must be a positive clock, not {_show(clock)}")

    def tiles_entry(self, value: Any, field: str) -> None:
        entry = self.obj(value, field)
        self.required(entry, ("tiles",), field + ".")
        for loop, size in self.obj(entry["tiles"], field + ".tiles").items():
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise self.fail(
                    f"{field}.tiles.{_key(loop)}", f"must be a positive integer, not {_show(size)}"
                )

    def blocks_entry(self, value: Any, field: str) -> None:
        entry = self.obj(value, field)
        self.required(entry, ("blocks",), field + ".")
        blocks = self.array(entry["blocks"], field + ".blocks")
        if not blocks:
            raise self.fail(field + ".blocks", "is empty")
        for i, block in enumerate(blocks):
            dims = self.array(block, f"{field}.blocks[{i}]")
            if not 1 <= len(dims) <= 3 or any(
                isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims
            ):
                raise self.fail(
                    f"{field}.blocks[{i}]", "must be 1 to 3 positive integers (x, y, z)"
                )
        if entry.get("clock_mhz") is not None:
            self.positive(entry["clock_mhz"], field + ".clock_mhz")
        for key in ("time_s", "energy_j"):
            if entry.get(key) is not None:
                self.nonnegative(entry[key], f"{field}.{key}")


def check_document(doc: Any, path: Any = None) -> Dict[str, Any]:
    """Check every field of a parsed profile that is present (see the module docstring).

    Returns ``doc`` unchanged.

    Raises:
        ProfileError: the first rule broken, naming the file and the field (one line).
    """
    c = _Checker(path)
    if not isinstance(doc, dict):
        raise c.fail("the document", f"must be a JSON object, not {_show(doc)}")
    version = doc.get("schema_version", SCHEMA_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise c.fail(
            "schema_version",
            f"{version} is newer than this governor understands ({SCHEMA_VERSION})",
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise c.fail("schema_version", f"must be a positive integer, not {_show(version)}")
    if "board" in doc:
        c.text(doc["board"], "board")
        if not doc["board"]:
            raise c.fail("board", "is empty")
    table = c.fingerprint(doc["fingerprint"], "fingerprint") if "fingerprint" in doc else None
    c.calibration(doc, "", table)
    if "workloads" in doc:
        c.workloads(doc["workloads"], table)
    if "tuning" in doc:
        c.tuning(doc["tuning"])
    if "provenance" in doc:
        c.obj(doc["provenance"], "provenance")
    return doc


#: the top-level fields of a calibration: a copy of the primary load's entry, which a new
#: calibration writes afresh (governor.profiles.profile.build_profile)
_TOP_CALIBRATION = (
    "method",
    "ppw_optimal_clock_mhz",
    "ridge_clock_mhz",
    "predicted_optimum_mhz",
    "optimum_interval",
    "idle_power_w",
    "device_time_s",
    "power_model",
    "time_model",
    "probes",
    "load",
    "notes",
    "warnings",
    "created",
    "device_uri",
)


def _passes(check: Any, *args: Any) -> bool:
    """Whether ``check(*args)`` (a :class:`_Checker` method) finds no rule broken."""
    try:
        check(*args)
    except ProfileError:
        return False
    return True


def salvage(doc: Any, clocks_mhz: Sequence[float]) -> Tuple[Dict[str, Any], List[str]]:
    """The parts of a profile that break no rule, for a calibration to merge into when the
    whole document does not pass :func:`check_document`: ``(kept, dropped)``, ``dropped``
    naming what was left out (``workloads.memory``, ``tuning.tiles.gemm/single``,
    ``the top-level calibration``, ...).

    Parts are checked one by one, each as the reader would check it in a profile made on a
    board with ``clocks_mhz`` (the board being calibrated): each ``workloads`` entry, each
    ``tuning`` entry, ``fingerprint``, ``provenance``, and the top-level calibration as a
    whole (which the new calibration writes afresh anyway). Fields no rule covers are kept.
    A ``schema_version`` newer than this governor's is not salvaged: ProfileError.

    Raises:
        ProfileError: the document is of a newer schema.
    """
    if not isinstance(doc, dict):
        return {}, ["the whole document"]
    version = doc.get("schema_version", SCHEMA_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        check_document({"schema_version": version})  # raises: newer than understood
    c = _Checker(None)
    table = list(clocks_mhz) or None
    kept: Dict[str, Any] = {}
    dropped: List[str] = []
    for key, value in doc.items():
        if key in _TOP_CALIBRATION or key == "schema_version":
            continue
        if key == "workloads":
            entries = value if isinstance(value, dict) else {}
            if not isinstance(value, dict):
                dropped.append("workloads")
            good = {}
            for name, entry in entries.items():
                if _passes(c.workloads, {name: entry}, table):
                    good[name] = entry
                else:
                    dropped.append(f"workloads.{_key(name)}")
            kept["workloads"] = good
        elif key == "tuning":
            sections = value if isinstance(value, dict) else {}
            if not isinstance(value, dict):
                dropped.append("tuning")
            tuning: Dict[str, Any] = {}
            for section, entries in sections.items():
                if not isinstance(entries, dict):
                    dropped.append(f"tuning.{_key(section)}")
                    continue
                good = {}
                for name, entry in entries.items():
                    if _passes(c.tuning, {section: {name: entry}}):
                        good[name] = entry
                    else:
                        dropped.append(f"tuning.{_key(section)}.{_key(name)}")
                tuning[section] = good
            kept["tuning"] = tuning
        elif key == "fingerprint":
            if _passes(c.fingerprint, value, "fingerprint"):
                kept[key] = value
            else:
                dropped.append("fingerprint")
        elif key == "provenance":
            if isinstance(value, dict):
                kept[key] = value
            else:
                dropped.append("provenance")
        elif key == "board":
            if isinstance(value, str) and value:
                kept[key] = value
            else:
                dropped.append("board")
        else:
            kept[key] = value
    top = {k: doc[k] for k in _TOP_CALIBRATION if k in doc}
    if top and _passes(c.calibration, top, "", table):
        kept.update(top)
    elif top:
        dropped.append("the top-level calibration")
    kept["schema_version"] = SCHEMA_VERSION
    return kept, dropped


def check_calibrated(doc: Dict[str, Any], path: Any = None) -> Dict[str, Any]:
    """:func:`check_document`, and the fields governor needs from a calibration.

    Raises:
        ProfileError: a rule broken or a required field missing (names file and field).
    """
    check_document(doc, path)
    _Checker(path).required(doc, ("board", "fingerprint") + _needed(doc), "")
    return doc


def check_clocks_for(doc: Mapping[str, Any], clocks_mhz: Sequence[float], path: Any = None) -> None:
    """The PPW-optimal and ridge clocks of ``doc`` and of its workloads lie within the range
    of ``clocks_mhz`` (a device's table); a clock between table entries is fine (it is
    snapped when applied).

    Raises:
        ProfileError: a clock outside the range (names file and field).
    """
    if not clocks_mhz:
        return
    c = _Checker(path)
    whose = "the device's supported clocks"
    c.clocks_within(doc, "", clocks_mhz, whose)
    for name, entry in (doc.get("workloads") or {}).items():
        c.clocks_within(entry, f"workloads.{_key(name)}.", clocks_mhz, whose)
