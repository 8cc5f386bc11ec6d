"""Fitting a simulated board's physics to a measured sweep, and building a *twin* from it.

Two steps, shared by ``scripts/make_sim_catalog.py`` (the catalog's measured boards) and the
``twin:PATH`` device:

- :func:`fit_time`: the smooth roofline t(f) = (t_mem^k + (c/f)^k)^(1/k) (best ``k`` on a grid,
  ``t_mem`` and ``c`` by least squares on relative error);
- :func:`fit_power`: ridge clock, voltage slope and the non-negative (P0, x_stall, x_busy) of
  P = P0 + f·V(f)²·(x_stall + x_busy·u(f)), u = (c/f)/t(f) the share of time the SMs compute.

Both evaluate :mod:`governor.models.formulas`. numpy and scipy are imported with this module,
which only the twin and the scripts import.

A twin (:func:`twin_board`) is a board whose built-in load is the sweep's workload. Its memory
clock model: the memory part of the run time is ``t_mem(f_mem) = a + b/f_mem`` (a latency part
that does not scale and a bandwidth part that does) and memory power is linear in ``f_mem``.
With one memory clock measured, ``a = 0`` (pure bandwidth) and the board has that memory clock
only; one row at a second memory clock fixes ``a``, ``b`` and the memory power's slope.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import numpy as np

from governor.devices.replay_files import MIN_CLOCKS, Sweep, _read_csv
from governor.devices.sim.physics import BoardSpec, RailSpec, VoltageCurve, Workload
from governor.errors import InvalidRequestError
from governor.models import formulas

__all__ = ["TwinSweeps", "fit_power", "fit_time", "read_twin_sweeps", "twin_board"]

_KS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)


def _t_model(f, tm: float, c: float, k: float):
    return formulas.roofline_time_s(c / f, tm, k)


def fit_time(f, t) -> Tuple[float, float, float]:
    """(k, t_mem_s, c_s_mhz) of the smooth roofline fitted to clocks ``f`` (MHz), times ``t`` (s)."""
    from scipy.optimize import least_squares

    f, t = np.asarray(f, dtype=float), np.asarray(t, dtype=float)
    best = None
    for k in _KS:
        for tm0 in (t.min() * 0.5, t.min() * 0.9, t.min() * 1e-3):

            def resid(p, k=k):
                tm, c = np.exp(p)
                return _t_model(f, tm, c, k) / t - 1.0

            sol = least_squares(resid, [math.log(tm0), math.log(t[0] * f[0])])
            err = float(np.abs(sol.fun).max())
            if best is None or err < best[0]:
                best = (err, k, *np.exp(sol.x))
    return best[1], float(best[2]), float(best[3])


def fit_power(f, p, t, k: float, tm: float, c: float):
    """(ridge_mhz, beta_per_mhz, [P0, x_stall, x_busy]) fitted to powers ``p`` (W).

    The score is the squared relative error plus a penalty when the model's energy optimum
    lands more than one clock away from the measured one (energy is flat there).
    """
    from scipy.optimize import nnls

    f, p, t = (np.asarray(v, dtype=float) for v in (f, p, t))
    t_fit = _t_model(f, tm, c, k)
    u = (c / f) / t_fit
    best = None
    for ridge in np.linspace(f.min() - 200.0, f.max(), 60):
        for beta in np.concatenate([[0.0], np.geomspace(1e-5, 3e-3, 40)]):
            volts = formulas.volts(f, ridge, beta)
            a = np.stack([np.ones_like(f), f * volts**2, f * volts**2 * u], 1)
            x, _ = nnls(a / p[:, None], np.ones_like(p))
            model = a @ x
            score = float(np.sum((model / p - 1) ** 2))
            if abs(int(np.argmin(model * t_fit)) - int(np.argmin(p * t))) > 1:
                score += 1.0
            if best is None or score < best[0]:
                best = (score, float(ridge), float(beta), x)
    _, ridge, beta, x = best
    return ridge, beta, [float(v) for v in x]


# ---------------------------------------------------------------------------- the twin
class TwinSweeps:
    """A sweep at the main memory clock and the rows measured at other memory clocks."""

    def __init__(self, main: Sweep, mem_clock_mhz: Optional[float], others: Dict[float, Sweep]):
        self.main = main
        self.mem_clock_mhz = mem_clock_mhz
        self.others = others


def read_twin_sweeps(path: Union[str, Path]) -> TwinSweeps:
    """Read a replay CSV, optionally with a ``mem_clock_mhz`` column (rows at several memory
    clocks). The memory clock with the most rows is the main sweep (>= 3 clocks); the others
    may have a single row.

    Raises:
        InvalidRequestError: unreadable file, bad rows, too few clocks (one line, with the path).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InvalidRequestError(f"{path}: cannot read the sweep ({err.strerror or err})") from err
    except UnicodeDecodeError as err:
        raise InvalidRequestError(f"{path}: not a text file") from err
    if text.lstrip().startswith("{"):  # a Kernel Tuner cache: one memory clock
        from governor.devices.replay_files import read_sweep

        return TwinSweeps(read_sweep(path), None, {})
    lines = text.splitlines()
    comments = [ln for ln in lines if ln.lstrip().startswith("#")]
    body = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if not body:
        raise InvalidRequestError(
            f"{path}: no header or rows (expected 'clock_mhz,power_w,time_s[,mem_clock_mhz]')"
        )
    header = [h.strip() for h in next(csv.reader([body[0]]))]
    if "mem_clock_mhz" not in header:
        sweep = _read_csv(path, text)
        groups: Dict[Optional[float], Sweep] = {None: sweep}
    else:
        col = header.index("mem_clock_mhz")
        by_mem: Dict[float, List[str]] = {}
        for number, line in enumerate(body[1:], start=2):
            cells = next(csv.reader([line]))
            try:
                mem = float(cells[col])
            except (IndexError, ValueError):
                raise InvalidRequestError(
                    f"{path}: data row {number - 1}: mem_clock_mhz {cells[col] if col < len(cells) else ''!r} is not a number"
                ) from None
            if not (math.isfinite(mem) and mem > 0):
                raise InvalidRequestError(
                    f"{path}: data row {number - 1}: mem_clock_mhz must be positive"
                )
            by_mem.setdefault(mem, []).append(line)
        if not by_mem:
            raise InvalidRequestError(f"{path}: no data rows")
        groups = {
            mem: _read_csv(path, "\n".join(comments + [body[0]] + rows))
            for mem, rows in by_mem.items()
        }
    main_key = max(groups, key=lambda m: (len(groups[m]), m or 0.0))
    main = groups.pop(main_key)
    if len(main) < MIN_CLOCKS:
        raise InvalidRequestError(
            f"{path}: only {len(main)} distinct clock(s) at the main memory clock; a twin needs at least {MIN_CLOCKS}"
        )
    return TwinSweeps(main, main_key, groups)  # type: ignore[arg-type]


def _clock_table(measured) -> Tuple[float, ...]:
    """Measured clocks plus points halfway between neighbours: the twin answers between them."""
    out = set(float(c) for c in measured)
    for a, b in zip(measured, measured[1:]):
        out.add(round((a + b) / 2.0, 3))
    return tuple(sorted(out))


def twin_board(sweeps: TwinSweeps, name: str = "twin") -> BoardSpec:
    """A :class:`BoardSpec` whose ``compute`` workload reproduces the sweep."""
    sw = sweeps.main
    f, p, t = (np.array(v, dtype=float) for v in (sw.clock_mhz, sw.power_w, sw.time_s))
    k, tm, c = fit_time(f, t)
    ridge, beta, (p0, xs, xb) = fit_power(f, p, t, k, tm, c)
    alpha = xs + xb
    if alpha <= 0:  # power does not rise with the clock: keep a tiny dynamic part
        alpha, xs, xb = 1e-9, 0.0, 1e-9
    voltage = VoltageCurve(max(0.0, ridge), beta)
    mem_ref = sweeps.mem_clock_mhz
    mem_power: Dict[float, float] = {}
    mem_points: Dict[float, float] = {}
    if mem_ref is not None:
        mem_power[mem_ref] = 0.0
        mem_points[mem_ref] = tm
    for mem, other in sweeps.others.items():
        # the memory part at this memory clock from its rows (compute part unchanged)
        parts = []
        for f_o, t_o in zip(other.clock_mhz, other.time_s):
            rest = t_o**k - (c / f_o) ** k
            parts.append(rest ** (1.0 / k) if rest > 0 else 0.0)
        tm_o = float(np.median(parts))
        mem_points[mem] = tm_o
        probe = Workload("probe", c, tm_o, k, xs / alpha, xb / alpha)
        deltas = []
        for f_o, p_o in zip(other.clock_mhz, other.power_w):
            u = probe.busy_fraction(f_o)
            dyn = formulas.cmos_power_w(f_o, alpha, voltage.ridge_mhz, voltage.beta_per_mhz)
            deltas.append(p_o - (p0 + dyn * (xs / alpha + xb / alpha * u)))
        mem_power[mem] = float(np.median(deltas))
    workload = Workload(
        name="compute",
        compute_mcycles=c,
        mem_s=tm,
        overlap_k=k,
        a_stall=xs / alpha,
        a_busy=xb / alpha,
        mem_clock_mhz=mem_ref,
        mem_s_at=dict(mem_points) if len(mem_points) > 1 else {},
        description=f"{sw.workload or 'the measured workload'} as measured on {sw.device}",
        source=f"fitted to {sw.path}",
    )
    memory = Workload(
        name="memory",
        compute_mcycles=0.3 * c,
        mem_s=max(tm, 0.5 * float(t.min())),
        overlap_k=3.0,
        a_stall=0.5,
        a_busy=0.5,
        mem_clock_mhz=mem_ref,
        mem_s_at={m: v / tm * max(tm, 0.5 * float(t.min())) for m, v in mem_points.items()}
        if len(mem_points) > 1 and tm > 0
        else {},
        description="memory-bound streaming load (generic, not measured)",
    )
    mems = tuple(sorted(mem_power)) if mem_power else ()
    top = float(f.max())
    return BoardSpec(
        name=name,
        display_name=f"twin of {Path(sw.path).name} ({sw.device})",
        kind="datacenter",
        clocks_mhz=_clock_table(sw.clock_mhz),
        static_w=max(0.0, p0),
        dyn_w_per_mhz=alpha,
        voltage=voltage,
        power_limit_w=2.0 * float(p.max()) + 1.0,
        mem_clocks_mhz=mems,
        default_mem_clock_mhz=mem_ref,
        mem_static_w=mem_power if len(mem_power) > 1 else {},
        idle_activity=0.02,
        leakage_per_c=0.0,
        thermal_r_c_per_w=0.1,
        thermal_tau_s=15.0,
        rails=(RailSpec("gpu", "gpu", ("gpu",), 12.0),),
        sensor="nvml",
        noise_rel=0.0,
        energy_counter=True,
        workloads={"compute": workload, "memory": memory},
        inferred=("clocks between measured ones", "memory load", f"top clock {top:g} MHz"),
        source=f"fitted to {sw.path}",
    )
