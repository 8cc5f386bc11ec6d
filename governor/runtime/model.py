"""What the governor predicts per clock: power and time under load, from the board's profile.

The profile's models (``power_model``: ``min(p_max_w, p_idle_w + alpha_w_per_mhz·f·V(f)²)``
with ``V = 1 + beta_per_mhz·max(0, f − ridge_clock_mhz)``; ``time_model``: the roofline
``(t_mem_s^k + (c_s_mhz/f)^k)^(1/k)`` plus the low-clock term; both evaluated by
:mod:`governor.models.formulas`) are computed once on the device's clock table,
so a control step is a table look-up. Without a profile a generic shape stands in (power
rising with f², time with 1/f) and :attr:`ClockModel.fitted` is False; the controllers
correct the level by measured power either way, so only the shape matters.

Pure Python on purpose: the runtime must not import numpy or scipy (a Jetson Nano has 4 GB
for everything).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from governor.devices.base import Device
from governor.errors import GovernorError, InvalidRequestError, ProfileError
from governor.models import formulas

__all__ = [
    "ClockModel",
    "LoadedModel",
    "fallback_model",
    "model_for_device",
    "model_from_profile",
    "prior_reason",
]

#: the model-free guess of the ridge (and PPW-optimal) clock, as a share of the top clock:
#: calibrated boards put it at 0.62-0.77 (RTX A4000 .. AGX Orin)
RIDGE_GUESS_SHARE = 0.75


@dataclass(frozen=True)
class ClockModel:
    """Predicted power (W, under the calibration load) and time per unit relative to the top
    clock, for each supported clock (ascending)."""

    clocks_mhz: Tuple[float, ...]
    power_w: Tuple[float, ...]
    time_rel: Tuple[float, ...]
    idle_w: float
    ppw_clock_mhz: float
    fitted: bool
    source: str
    #: the profile was not made on this unit (a shipped reference profile, or another unit of
    #: the same model): its PPW clock is where an online search starts, not the answer
    prior: bool = False
    #: the (core, memory) pair with the least board energy per unit that the profile keeps
    #: for this load (MHz; None: none, e.g. a board with one memory clock). The core clock is
    #: the pair's only while the memory clock is the pair's: else ``ppw_clock_mhz`` holds.
    ppw_pair_mhz: Optional[Tuple[float, float]] = None
    #: how much less power (W, on the scope calibrate measured pairs on: the board's input
    #: where metered) the calibration load drew at the pair's memory clock than at the
    #: default, at one core clock, from the pair's probes (None: not measured)
    pair_drop_w: Optional[float] = None
    #: table clock -> its index (the first of equal clocks); set in __post_init__
    index_of: Dict[float, int] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        # a table clock's index, built once per model: a control step looks up the clock it
        # applied several times (not a field: eq, hash and repr are the table's)
        index_of: Dict[float, int] = {}
        for i, f in enumerate(self.clocks_mhz):
            index_of.setdefault(f, i)  # (the first of equal clocks, as the bisection finds)
        object.__setattr__(self, "index_of", index_of)

    def index(self, clock_mhz: float) -> int:
        """Index of the table clock nearest ``clock_mhz``."""
        i = self.index_of.get(clock_mhz)
        if i is not None:
            return i
        clocks = self.clocks_mhz
        lo, hi = 0, len(clocks) - 1
        while lo < hi:  # first clock >= value
            mid = (lo + hi) // 2
            if clocks[mid] < clock_mhz:
                lo = mid + 1
            else:
                hi = mid
        if lo > 0 and abs(clocks[lo - 1] - clock_mhz) <= abs(clocks[lo] - clock_mhz):
            return lo - 1
        return lo

    def power_at(self, clock_mhz: float) -> float:
        return self.power_w[self.index(clock_mhz)]

    def time_rel_at(self, clock_mhz: float) -> float:
        return self.time_rel[self.index(clock_mhz)]

    @property
    def top_mhz(self) -> float:
        return self.clocks_mhz[-1]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "fitted": self.fitted,
            "source": self.source,
            "ppw_clock_mhz": self.ppw_clock_mhz,
            "prior": self.prior,
        }


def _power(f: float, pm: Mapping[str, Any]) -> float:
    p_max = pm.get("p_max_w")
    return float(
        formulas.power_w(
            f,
            float(pm["p_idle_w"]),
            float(pm["alpha_w_per_mhz"]),
            float(pm["ridge_clock_mhz"]),
            float(pm["beta_per_mhz"]),
            math.inf if p_max is None else float(p_max),
        )
    )


def _time(f: float, tm: Optional[Mapping[str, Any]]) -> float:
    if not tm:
        return 1.0 / f
    return float(
        formulas.time_s(
            f,
            max(0.0, float(tm.get("t_mem_s", 0.0))),
            float(tm.get("c_s_mhz", 1.0)),
            max(1.0, float(tm.get("k", 1.0))),
            float(tm.get("low_s", 0.0)),
            float(tm.get("low_ref_mhz", 1.0)),
            float(tm.get("low_exp", 0.0)),
        )
    )


def _snap(clocks: Sequence[float], value: float) -> float:
    return min(clocks, key=lambda c: (abs(c - value), c))


def model_from_profile(
    clocks_mhz: Sequence[float],
    doc: Mapping[str, Any],
    *,
    workload: Optional[str] = None,
    source: str = "profile",
) -> ClockModel:
    """The model of a calibrated profile (``workload``: one of its ``workloads`` entries),
    evaluated on ``clocks_mhz``. ``doc`` is expected to have passed the profile checks
    (:mod:`governor.profiles.schema`); what they cannot see is checked here.

    Raises:
        ProfileError: the workload is not in the profile, or its models give a non-finite or
            non-positive power or time at one of the clocks (names ``source`` and the field).
    """
    clocks = tuple(sorted(float(c) for c in clocks_mhz))
    entry: Mapping[str, Any] = doc
    field = ""
    if workload is not None:
        workloads = doc.get("workloads") or {}
        if workload not in workloads:
            raise ProfileError(f"{source}: has no workloads.{workload} calibration")
        entry = workloads[workload]
        field = f"workloads.{workload}."
    pair, drop = _pair_and_drop(clocks, doc, entry, workload)
    if entry.get("method", "model") == "best-probe":
        return replace(_from_probes(clocks, entry, source), ppw_pair_mhz=pair, pair_drop_w=drop)
    try:
        pm = entry["power_model"]
        tm = entry.get("time_model")
        power = tuple(_power(f, pm) for f in clocks)
        times = [_time(f, tm) for f in clocks]
        ppw = float(entry["ppw_optimal_clock_mhz"])
    except (KeyError, TypeError, ValueError, OverflowError, ZeroDivisionError) as err:
        raise ProfileError(
            f"{source}: {field}power_model/time_model unusable ({type(err).__name__}: {err})"
        ) from None

    def check(name: str, values: Sequence[float]) -> None:
        for f, value in zip(clocks, values):
            if not (math.isfinite(value) and value > 0):
                raise ProfileError(
                    f"{source}: {name} gives {value:g} at {f:g} MHz; it must be positive and finite"
                )

    check(field + "power_model", power)
    check(field + "time_model", times)
    time_rel = tuple(t / times[-1] for t in times)
    check(field + "time_model", time_rel)  # relative to the top clock: may still overflow
    return ClockModel(
        clocks_mhz=clocks,
        power_w=power,
        time_rel=time_rel,
        idle_w=max(0.0, float(pm["p_idle_w"])),
        ppw_clock_mhz=_snap(clocks, ppw),
        fitted=True,
        source=source,
        ppw_pair_mhz=pair,
        pair_drop_w=drop,
    )


def _pair_on(
    clocks: Tuple[float, ...], doc: Mapping[str, Any], workload: Optional[str]
) -> Optional[Tuple[float, float]]:
    """The profile's PPW (core, memory) pair, its core clock snapped to ``clocks``."""
    from governor.profiles.profile import ppw_pair

    pair = ppw_pair(doc, workload)
    return None if pair is None else (_snap(clocks, pair[0]), pair[1])


def _pair_and_drop(
    clocks: Tuple[float, ...], doc: Mapping[str, Any], entry: Mapping[str, Any], workload: Any
) -> Tuple[Optional[Tuple[float, float]], Optional[float]]:
    """The profile's PPW pair (:func:`_pair_on`) and its power drop (:func:`_pair_drop_w`)."""
    pair = _pair_on(clocks, doc, workload)
    return pair, _pair_drop_w(doc, entry, pair)


def _pair_drop_w(
    doc: Mapping[str, Any], entry: Mapping[str, Any], pair: Optional[Tuple[float, float]]
) -> Optional[float]:
    """The power the calibration load drew less at the pair's memory clock than at the
    default one, at a core clock probed at both (``tuning.ppw-pair.<load>.probes``); None
    where the probes do not say (a hand-written pair, a malformed entry)."""
    load = entry.get("load")
    name = load.get("name") if isinstance(load, Mapping) else None
    kept = ((doc.get("tuning") or {}).get("ppw-pair") or {}).get(name) if name else None
    if pair is None or not isinstance(kept, Mapping):
        return None
    try:
        default = float(kept["default_mem_clock_mhz"])
        at: Dict[Tuple[float, float], float] = {
            (float(r["clock_mhz"]), float(r["mem_clock_mhz"])): float(r["power_w"])
            for r in kept.get("probes") or ()
        }
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    drops = [
        p - at[(f, pair[1])] for (f, m), p in at.items() if m == default and (f, pair[1]) in at
    ]
    return max(0.0, max(drops)) if drops and all(math.isfinite(d) for d in drops) else None


def _interp(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    for i in range(1, len(xs)):
        if x <= xs[i]:
            w = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
            return ys[i - 1] + w * (ys[i] - ys[i - 1])
    return ys[-1]  # pragma: no cover


def _from_probes(clocks: Tuple[float, ...], entry: Mapping[str, Any], source: str) -> ClockModel:
    """A best-probe profile (no model explained the data): its measured probes, interpolated
    linearly over the clock table. Beyond the probed range, power is held at the nearest probe
    and time scales as 1/f from it."""
    rows = [
        (float(p["requested_mhz"]), float(p["power_w"]), float(p["time_per_unit_s"]), p)
        for p in entry["probes"]
    ]
    probes = sorted(r[:3] for r in rows if r[3].get("status", "ok") != "throttled") or sorted(
        r[:3] for r in rows
    )
    if not probes:
        raise ValueError("a best-probe profile without probes")
    xs = [p[0] for p in probes]
    power = tuple(_interp(xs, [p[1] for p in probes], f) for f in clocks)
    times = []
    for f in clocks:
        if f < xs[0]:
            times.append(probes[0][2] * xs[0] / f)
        elif f > xs[-1]:
            times.append(probes[-1][2] * xs[-1] / f)
        else:
            times.append(_interp(xs, [p[2] for p in probes], f))
    if not all(math.isfinite(p) and p > 0 for p in power) or not all(
        math.isfinite(t) and t > 0 for t in times
    ):
        raise ValueError("the profile's probes give non-positive power or time")
    idle = entry.get("idle_power_w")
    return ClockModel(
        clocks_mhz=clocks,
        power_w=power,
        time_rel=tuple(t / times[-1] for t in times),
        idle_w=max(0.0, float(idle)) if idle is not None else 0.3 * min(power),
        ppw_clock_mhz=_snap(clocks, float(entry["ppw_optimal_clock_mhz"])),
        fitted=True,
        source=f"{source} (best-probe: measured probes interpolated, no model)",
    )


def fallback_model(clocks_mhz: Sequence[float], reason: str) -> ClockModel:
    """A model-free stand-in: power 0.3 + 0.7·(f/f_top)², time ∝ 1/f, PPW clock guessed at
    ``RIDGE_GUESS_SHARE`` of the top clock."""
    clocks = tuple(sorted(float(c) for c in clocks_mhz))
    top = clocks[-1]
    return ClockModel(
        clocks_mhz=clocks,
        power_w=tuple(0.3 + 0.7 * (f / top) ** 2 for f in clocks),
        time_rel=tuple(top / f for f in clocks),
        idle_w=0.3,
        ppw_clock_mhz=_snap(clocks, RIDGE_GUESS_SHARE * top),
        fitted=False,
        source=f"no calibrated model ({reason}): generic shape, PPW clock guessed at "
        f"{RIDGE_GUESS_SHARE:.0%} of the top clock",
    )


@dataclass
class LoadedModel:
    """What :func:`model_for_device` found: the model, the profile's path (None: given as a
    mapping, or none used), the lookup's notes, and the notes to say (and log)."""

    model: ClockModel
    profile_path: Optional[str] = None
    found_notes: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)


def _profile_doc(
    device: Device, profile: Union[None, bool, Mapping[str, Any], str, Path]
) -> Tuple[Optional[Mapping[str, Any]], Optional[str], List[str], str]:
    """(profile document or None, its path, the lookup's notes, why there is none)."""
    from governor.profiles.profile import check_profile_for, lookup_profile_for
    from governor.profiles.store import read_profile_file

    if profile is False:  # asked to use none (to find the PPW clock online, say)
        return None, None, [], "profile not used"
    if profile is None:
        path, doc, found_notes = lookup_profile_for(device)
        if doc is None:
            return None, None, [], found_notes[0]
        return doc, str(path), list(found_notes), ""
    if isinstance(profile, (str, Path)):
        doc = check_profile_for(read_profile_file(Path(profile)), device, profile)
        return doc, str(profile), [], ""
    if isinstance(profile, Mapping):
        return check_profile_for(dict(profile), device), None, [], ""
    raise InvalidRequestError(f"profile must be a path, a mapping, None or False, not {profile!r}")


def model_for_device(
    device: Device,
    profile: Union[None, bool, Mapping[str, Any], str, Path],
    workload: Optional[str],
) -> LoadedModel:
    """The clock model of ``device`` for ``workload``: from the profile given (a path or a
    mapping), found for the board (None), or none (False); the generic model when there is
    none for this board (or it is another board's), said in the notes.

    Raises:
        InvalidRequestError: no clocks to govern, or ``profile`` of another type.
        ProfileError: the profile is malformed or its clocks are outside the device's.
    """
    clocks = device.supported_clocks_mhz()
    if not clocks:
        raise InvalidRequestError(f"{device.uri} reports no supported GPU clocks to govern")
    doc, path, found_notes, reason = _profile_doc(device, profile)
    if doc is None:
        model = fallback_model(clocks, reason)
        return LoadedModel(model, path, found_notes, [model.source])
    warnings: List[str] = []
    source = f"profile {path}" if path else "profile (given)"
    if workload is not None and workload not in (doc.get("workloads") or {}):
        warnings.append(
            f"the profile has no calibration of workload {workload!r}; using its built-in load"
        )
        workload = None
    model = model_from_profile(clocks, doc, workload=workload, source=source)
    why = prior_reason(doc, device)
    if why is not None:
        model = replace(model, prior=True)
        found_notes.append(f"the profile is {why}: its PPW clock is a starting point")
    return LoadedModel(model, path, found_notes, warnings)


def ppw_pair_for(device: Device, model: ClockModel) -> Tuple[Optional[Tuple[float, float]], str]:
    """The (core, memory) pair to set for the PPW policy on ``device`` (MHz, each snapped to
    the device's tables) and ``""``; or None and why not, in one line (``""``: nothing to
    say: the profile keeps no pair, or it is not this unit's calibration, whose PPW clock is
    searched online from the core clock's). Where the device cannot set its memory clock,
    the core clock alone (``model.ppw_clock_mhz``) is governed, as on a board with one."""
    pair = model.ppw_pair_mhz
    if pair is None or not model.fitted or model.prior:
        return None, ""
    said = f"the profile's PPW pair ({pair[0]:g} MHz core, {pair[1]:g} MHz memory)"
    alone = f"the core clock alone at {model.ppw_clock_mhz:g} MHz"
    if not device.capabilities.lock_mem_clock:
        return None, f"{said} needs the memory clock, which {device.uri} cannot set: {alone}"
    try:
        mem = device.snap_clock_mhz(pair[1], mem=True)
    except GovernorError as err:  # another board's pair: outside this one's table
        return None, f"{said} does not fit {device.uri} ({err}): {alone}"
    table = core_table_at(device, mem)
    if table and not (table[0] - 0.5 <= pair[0] <= table[-1] + 0.5):
        return None, (
            f"{said} does not fit {device.uri}: at {mem:g} MHz memory it offers "
            f"{table[0]:g}-{table[-1]:g} MHz core: {alone}"
        )
    return (pair[0], mem), ""


def core_table_at(device: Device, mem_clock_mhz: float) -> Tuple[float, ...]:
    """The core clocks ``device`` offers at ``mem_clock_mhz`` where they depend on the memory
    clock (NVML: ``supported_clocks_by_mem_mhz``); empty where they do not (Jetson, sim)."""
    by_mem = getattr(device, "supported_clocks_by_mem_mhz", None)
    if by_mem is None:
        return ()
    return tuple(by_mem().get(mem_clock_mhz, ()))


def prior_reason(doc: Mapping[str, Any], device: Device) -> Optional[str]:
    """Why ``doc`` (a profile of ``device``'s model) is not this unit's own calibration, or
    None when it is: a shipped reference profile (fingerprint kind ``reference``: fitted to
    someone else's measurements), or one whose serial or UUID is another unit's. Chips of one
    model differ in leakage and voltage, so such a profile's PPW clock is near this unit's,
    not on it."""
    fp = doc.get("fingerprint") or {}
    if fp.get("kind") == "reference":
        return "a reference profile, not this unit's calibration"
    ident = device.identity
    for key, mine in (("serial", ident.serial), ("uuid", ident.uuid)):
        theirs = fp.get(key)
        if theirs and mine and theirs != mine:
            return f"another unit's calibration ({key} {theirs})"
    return None
