"""Fitting a simulated board's physics to a measured sweep, and building a *twin* from it.

Two steps, shared by ``scripts/make_sim_catalog.py`` (the catalog's measured boards) and the
``twin:PATH`` device:

- :func:`fit_time`: the smooth roofline t(f) = (t_mem^k + (c/f)^k)^(1/k) (best ``k`` on a grid,
  ``t_mem`` and ``c`` by least squares on relative error);
- :func:`fit_power`: ridge clock, voltage slope and the non-negative (P0, x_stall, x_busy) of
  P = P0 + f·V(f)²·(x_stall + x_busy·u(f)), u = (c/f)/t(f) the share of time the SMs compute.

Both evaluate :mod:`governor.models.formulas`. numpy and scipy are imported with this module,
which only the twin and the scripts import. The catalog keeps these two as they are (its file
must not change); a twin uses :func:`fit_twin`: the same model, fitted with a linear solve per
``k`` for time, a soft-L1 loss for power, and a power cap where the top rows are flat.

A twin (:func:`twin_board`) is a board whose built-in load is the sweep's workload; at a
measured clock it answers the measured row (the fit times each row's own departure). Its memory
clock model: the memory part of the run time is ``t_mem(f_mem) = a + b/f_mem`` (a latency part
that does not scale and a bandwidth part that does) and memory power is linear in ``f_mem``.
With one memory clock measured, ``a = 0`` (pure bandwidth) and the board has that memory clock
only; one row at a second memory clock fixes ``a``, ``b`` and the memory power's slope. At a
lower memory clock the core-voltage floor drops, and the roofline's overlap exponent there is
its own: both fitted from three rows there on, else the priors :data:`MEM_FLOOR_V` and
:data:`MEM_OVERLAP_K`. With a second memory clock the activity's split between the SMs waiting
and computing is the prior :data:`MEM_BUSY_SHARE` (a main sweep with the SMs busy throughout
cannot tell it).
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from governor.devices.replay_files import MIN_CLOCKS, Sweep, _read_csv
from governor.devices.sim.physics import BoardSpec, RailSpec, VoltageCurve, Workload
from governor.errors import InvalidRequestError
from governor.models import formulas

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "MEM_BUSY_SHARE",
    "MEM_FLOOR_V",
    "MEM_OVERLAP_K",
    "TwinFit",
    "TwinSweeps",
    "fit_power",
    "fit_time",
    "fit_twin",
    "fit_twin_power",
    "fit_twin_time",
    "read_twin_sweeps",
    "twin_board",
]

_KS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)


def _t_model(f: np.ndarray, tm: float, c: float, k: float) -> np.ndarray:
    return formulas.roofline_time_s(c / f, tm, k)


def fit_time(f: ArrayLike, t: ArrayLike) -> Tuple[float, float, float]:
    """(k, t_mem_s, c_s_mhz) of the smooth roofline fitted to clocks ``f`` (MHz), times ``t`` (s)."""
    from scipy.optimize import least_squares

    f, t = np.asarray(f, dtype=float), np.asarray(t, dtype=float)
    best = None
    for k in _KS:
        for tm0 in (t.min() * 0.5, t.min() * 0.9, t.min() * 1e-3):

            def resid(p: np.ndarray, k: float = k) -> np.ndarray:
                tm, c = np.exp(p)
                return _t_model(f, tm, c, k) / t - 1.0

            sol = least_squares(resid, [math.log(tm0), math.log(t[0] * f[0])])
            err = float(np.abs(sol.fun).max())
            if best is None or err < best[0]:
                best = (err, k, *np.exp(sol.x))
    if best is None:  # _KS is never empty
        raise ValueError("no time model was fitted")
    return best[1], float(best[2]), float(best[3])


def fit_power(
    f: ArrayLike, p: ArrayLike, t: ArrayLike, k: float, tm: float, c: float
) -> Tuple[float, float, List[float]]:
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
    if best is None:  # the grids are never empty
        raise ValueError("no power model was fitted")
    _, ridge, beta, x = best
    return ridge, beta, [float(v) for v in x]


# ---------------------------------------------------------------------------- the twin's fit
#: the roofline's overlap exponents a twin tries (a finer grid than the catalog's: each costs
#: one linear solve)
_TWIN_KS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 12.0)
#: a power cap is looked for among the top rows within this share of the highest power
_CAP_SHARE = 0.97
#: ... and only when at least this many rows sit there: two rows always lie on a line, a
#: third tests that the top is flat (the Titan X sweeps' top two rows are within 3 %, uncapped)
_CAP_MIN_ROWS = 3
#: scale of the soft-L1 loss of the twin's power fit (relative error): about three times the
#: median scatter of the measured sweeps about their neighbours (0.3 %), fixed up front
_ROBUST_REL = 0.01
#: ridge clocks and voltage slopes the twin's power fit tries
_TWIN_GRID = (30, 24)


def fit_twin_time(f: ArrayLike, t: ArrayLike) -> Tuple[float, float, float]:
    """(k, t_mem_s, c_s_mhz) of the smooth roofline, for a twin: for each ``k`` the roofline
    is linear in (t_mem^k, c^k) against t^k (non-negative least squares, weighted so that the
    residuals are relative errors of t), and the ``k`` with the least squared relative error
    wins. Same model as :func:`fit_time` (which the catalog keeps), faster and in least
    squares rather than worst case."""
    from scipy.optimize import nnls

    f, t = np.asarray(f, dtype=float), np.asarray(t, dtype=float)
    best = None
    for k in _TWIN_KS:
        a = np.stack([np.ones_like(f), f**-k], 1) / (k * t[:, None] ** k)
        x, _ = nnls(a, np.full_like(t, 1.0 / k))
        if x[1] <= 0:
            continue
        tm, c = float(x[0] ** (1.0 / k)), float(x[1] ** (1.0 / k))
        err = float(np.sum((_t_model(f, tm, c, k) / t - 1.0) ** 2))
        if best is None or err < best[0]:
            best = (err, k, tm, c)
    if best is None:  # time does not fall with the clock: all memory
        return 1.0, float(np.median(t)), 0.0
    return best[1], best[2], best[3]


#: length scales the residual smoother tries, in median clock steps of the sweep
_SMOOTH_STEPS = (1.0, 2.0, 4.0, 8.0, 16.0)
#: shares of the residuals' variance it tries as signal (the rest is noise); 0 is no smoothing
_SMOOTH_SHARES = (0.0, 0.25, 0.5, 0.75, 0.9, 0.97)


class Residuals:
    """The smooth part of a sweep's relative departures from the model, as a function of the
    clock: a Gaussian-process mean (Matérn 3/2 kernel on the clock, zero prior mean) of
    ``log(measured / model)``. Its length scale and signal share are the ones with the least
    summed absolute leave-one-out error over the rows given (closed form), from grids fixed up
    front; share 0, no correction, wins unless neighbouring rows predict each other's residuals
    better than nothing. So noise stays noise, and a real feature several rows wide (A40 BLOOM
    forward: run time 6 % above the trend from 1065 to ~1250 MHz) is kept."""

    def __init__(
        self,
        clocks_mhz: ArrayLike,
        log_ratio: ArrayLike,
        steps: Sequence[float] = _SMOOTH_STEPS,
        shares: Sequence[float] = _SMOOTH_SHARES,
    ) -> None:
        f = np.asarray(clocks_mhz, dtype=float)
        r = np.asarray(log_ratio, dtype=float)
        self.clocks_mhz, self.weights = f, np.zeros_like(f)
        self.scale_mhz, self.share = 1.0, 0.0
        if len(f) < 4 or not np.all(np.isfinite(r)):
            return
        step = float(np.median(np.diff(np.sort(f))))
        if not step > 0:
            return
        best = float(np.sum(np.abs(r)))  # share 0: every row predicted as the model
        d = np.abs(f[:, None] - f[None, :])
        eye = np.eye(len(f))
        for n_steps in steps:
            kern = self._kernel(d, n_steps * step)
            for share in shares:
                if share <= 0:
                    continue
                inv = np.linalg.inv(share * kern + (1.0 - share) * eye)
                alpha = inv @ r
                score = float(np.sum(np.abs(alpha / np.diag(inv))))
                if score < best - 1e-12:
                    best = score
                    self.scale_mhz, self.share = n_steps * step, share
                    self.weights = share * alpha

    @staticmethod
    def _kernel(d: np.ndarray, scale: float) -> np.ndarray:
        x = math.sqrt(3.0) * d / scale
        return (1.0 + x) * np.exp(-x)

    def factor(self, clocks_mhz: ArrayLike) -> np.ndarray:
        """exp(smoothed log-ratio) at ``clocks_mhz``: 1 where nothing was kept."""
        f = np.atleast_1d(np.asarray(clocks_mhz, dtype=float))
        if self.share <= 0:
            return np.ones_like(f)
        kern = self._kernel(np.abs(f[:, None] - self.clocks_mhz[None, :]), self.scale_mhz)
        return np.exp(kern @ self.weights)


class TwinFit:
    """The fitted parameters of a twin: time (k, t_mem_s, c), power (ridge, beta, P0,
    x_stall, x_busy), the power cap ``cap_w`` (inf: none seen), and the smoothed residuals of
    time and power (:class:`Residuals`, set by :func:`fit_twin`)."""

    def __init__(
        self,
        k: float,
        tm: float,
        c: float,
        ridge: float,
        beta: float,
        coef: Sequence[float],
        cap_w: float,
        capped_rows: int,
    ) -> None:
        self.k, self.tm, self.c = k, tm, c
        self.ridge, self.beta = ridge, beta
        self.p0, self.xs, self.xb = coef
        self.cap_w = cap_w
        self.capped_rows = capped_rows
        self.time_residuals: Optional[Residuals] = None
        self.power_residuals: Optional[Residuals] = None

    def power_time(self, f: ArrayLike) -> Tuple[np.ndarray, np.ndarray]:
        """(power_w, time_s) at clocks ``f`` without the cap."""
        f = np.asarray(f, dtype=float)
        t = _t_model(f, self.tm, self.c, self.k)
        u = (self.c / f) / t
        dyn = formulas.cmos_power_w(f, 1.0, self.ridge, self.beta)
        return self.p0 + dyn * (self.xs + self.xb * u), t


_SUBSETS = ((0, 1, 2), (0, 1), (0, 2), (1, 2), (0,), (1,), (2,))


def _nnls3(a: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares of many 3-unknown problems at once: ``a`` (G, n, 3), ``y``
    (G, n) -> x (G, 3). Exact: the solution is the best of the unconstrained solutions on
    each subset of the unknowns that come out non-negative."""
    g = a.shape[0]
    best_x = np.zeros((g, 3))
    best_rss = np.einsum("gn,gn->g", y, y)
    for subset in _SUBSETS:
        sub = a[:, :, subset]
        m = np.einsum("gni,gnj->gij", sub, sub)
        b = np.einsum("gni,gn->gi", sub, y)
        ok = np.abs(np.linalg.det(m)) > 1e-300
        x = np.zeros((g, len(subset)))
        if ok.any():
            x[ok] = np.linalg.solve(m[ok], b[ok][..., None])[..., 0]
        full = np.zeros((g, 3))
        full[:, subset] = x
        r = y - np.einsum("gni,gi->gn", a, full)
        rss = np.einsum("gn,gn->g", r, r)
        better = ok & np.all(x >= 0, axis=1) & (rss < best_rss - 1e-15)
        best_x[better] = full[better]
        best_rss[better] = rss[better]
    return best_x


def fit_twin_power(
    f: ArrayLike,
    p: ArrayLike,
    t: ArrayLike,
    k: float,
    tm: float,
    c: float,
    robust_rel: float = _ROBUST_REL,
    grid: Tuple[int, int] = _TWIN_GRID,
) -> Tuple[float, float, List[float]]:
    """(ridge_mhz, beta_per_mhz, [P0, x_stall, x_busy]) for a twin: the model and grid of
    :func:`fit_power` (with its energy-optimum penalty), all grid points solved at once, and
    the soft-L1 loss of the relative error (scale ``robust_rel``) by reweighted NNLS, so that
    one glitch row weighs as |r| rather than r²."""
    f, p, t = (np.asarray(v, dtype=float) for v in (f, p, t))
    t_fit = _t_model(f, tm, c, k)
    u = (c / f) / t_fit
    ridges, betas = np.meshgrid(
        np.linspace(f.min() - 200.0, f.max(), grid[0]),
        np.concatenate([[0.0], np.geomspace(1e-5, 3e-3, grid[1])]),
        indexing="ij",
    )
    ridges, betas = ridges.ravel(), betas.ravel()
    volts = formulas.volts(f[None, :], ridges[:, None], betas[:, None])
    dyn = f[None, :] * volts**2
    a = np.stack([np.ones_like(dyn), dyn, dyn * u[None, :]], 2) / p[None, :, None]
    w = np.ones((len(ridges), len(f)))
    for _ in range(3):
        x = _nnls3(a * w[:, :, None], w)
        r = np.einsum("gni,gi->gn", a, x) - 1.0
        s = np.abs(r) / robust_rel
        w = np.where(s <= 1.0, 1.0, 1.0 / np.sqrt(np.maximum(s, 1.0)))
    score = np.sum(2.0 * robust_rel**2 * (np.sqrt(1.0 + (r / robust_rel) ** 2) - 1.0), axis=1)
    model_energy = (r + 1.0) * (p * t_fit)[None, :]
    off = np.abs(np.argmin(model_energy, axis=1) - int(np.argmin(p * t))) > 1
    score = score + np.where(off, 1.0, 0.0)
    i = int(np.argmin(score))
    return float(ridges[i]), float(betas[i]), [float(v) for v in x[i]]


def fit_twin(f: ArrayLike, p: ArrayLike, t: ArrayLike, smooth: bool = True) -> TwinFit:
    """Fit a twin to a sweep: clocks ``f`` (MHz, ascending), powers ``p`` (W), times ``t`` (s).

    The model of :func:`fit_power` / :func:`fit_time`, with one more choice: a power cap.
    Where three or more top rows sit within 3 % of the highest power (the A40 sweeps above
    ~1450 MHz sit at its 300 W limit), the fit is tried both ways: with every row, and with
    those rows taken as the cap (their highest power: the limit the board was seen holding,
    so no measured row is above it; the rest fit the model, time included,
    since a capped row ran at a lower clock than asked). Power is fitted with a soft-L1 loss
    (scale 1 %), time by :func:`fit_twin_time`. The one with the lower BIC (squared relative
    error of power over all rows, one more parameter for the cap) wins. Only the rows given
    are used, so a held-out row never informs the choice.
    """
    f, p, t = (np.asarray(v, dtype=float) for v in (f, p, t))
    n = len(f)
    candidates = [0]
    m = 0
    while m < n and p[n - 1 - m] >= _CAP_SHARE * p.max():
        m += 1
    if _CAP_MIN_ROWS <= m <= n // 2 and n - m >= 3:
        candidates.append(m)
    best = None
    for m in candidates:
        k, tm, c = fit_twin_time(f[: n - m], t[: n - m])
        ridge, beta, coef = fit_twin_power(
            f[: n - m], p[: n - m], t[: n - m], k, tm, c, grid=_TWIN_GRID
        )
        cap = float(np.max(p[n - m :])) if m else math.inf
        fit = TwinFit(k, tm, c, ridge, beta, coef, cap, m)
        model = np.minimum(fit.power_time(f)[0], cap)
        sse = float(np.sum((model / p - 1.0) ** 2))
        bic = n * math.log(sse / n + 1e-12) + (6 + (1 if m else 0)) * math.log(n)
        if best is None or bic < best[0]:
            best = (bic, fit)
    if best is None:  # candidates always holds 0
        raise ValueError("no twin was fitted")
    fit = best[1]
    if smooth:
        used = n - fit.capped_rows  # capped rows ran at another clock than the one asked
        p_model, t_model = fit.power_time(f[:used])
        fit.time_residuals = Residuals(f[:used], np.log(t[:used] / t_model))
        fit.power_residuals = Residuals(f[:used], np.log(p[:used] / np.maximum(p_model, 1e-9)))
    return fit


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
    from governor.devices.replay_columns import canonical_csv, strip_bom

    text = strip_bom(text)
    if text.lstrip().startswith("{"):  # a Kernel Tuner cache: one memory clock
        from governor.devices.replay_files import read_sweep

        return TwinSweeps(read_sweep(path), None, {})
    text = canonical_csv(path, text)
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
    others = {mem: sweep for mem, sweep in groups.items() if mem is not None}
    return TwinSweeps(main, main_key, others)


#: The core-voltage floor at a lower memory clock, relative to the floor at the main one. A
#: GPU holds a minimum core voltage that rises with the memory clock, so the power curve at a
#: lower memory clock keeps falling where the main sweep's flattens. One row at the lower
#: memory clock cannot tell this floor from the memory power; three or more rows there fit it
#: (``_FLOOR_GRID``). With fewer, it is this prior (with :data:`MEM_OVERLAP_K` and
#: :data:`MEM_BUSY_SHARE`, chosen together on the 23 Titan X apps' 810 MHz sweeps:
#: docs/simulator.md; its figures hold each app out).
MEM_FLOOR_V = 0.8

#: The roofline's overlap exponent at another memory clock than the main sweep's. A sweep at
#: the main memory clock where the compute part dominates cannot tell how sharply the two
#: parts overlap (its fitted ``k`` is noise: 12 and 1 fit the Titan X's compute-bound apps
#: within 0.1 % of each other); at a lower memory clock both parts matter, and one row there
#: fixes the memory part only. So ``k`` there is this prior, fitted from three rows on.
MEM_OVERLAP_K = 4.0

#: The share of the dynamic power's activity that follows the SMs' busy share ``u`` (the rest
#: is spent while they wait), at a twin with more than one memory clock. The main sweep of a
#: compute-bound app has ``u`` near 1 at every clock and cannot split the two (a split fixed
#: at this share fits the Titan X sweeps as well as a free one); a lower memory clock makes
#: the SMs wait, and how much power that saves is this share.
MEM_BUSY_SHARE = 0.7


#: floors tried when the rows at a lower memory clock can identify it
_FLOOR_GRID = tuple(round(0.5 + 0.025 * i, 3) for i in range(21))
#: rows at a lower memory clock that fit its floor and overlap exponent: two unknowns (floor,
#: memory power) and a third row to tell them apart from noise; fewer use the priors
#: :data:`MEM_FLOOR_V` and :data:`MEM_OVERLAP_K`
_FLOOR_MIN_ROWS = 3


class _Activity:
    """The dynamic power's coefficient ``alpha`` (W/MHz at V = 1) and its split into the
    shares spent while the SMs wait (``a_stall``) and while they compute (``a_busy``)."""

    def __init__(self, alpha: float, a_stall: float, a_busy: float) -> None:
        self.alpha, self.a_stall, self.a_busy = alpha, a_stall, a_busy

    @classmethod
    def of_fit(cls, fit: TwinFit) -> _Activity:
        alpha = fit.xs + fit.xb
        if alpha <= 0:  # power does not rise with the clock: keep a tiny dynamic part
            return cls(1e-9, 0.0, 1.0)
        return cls(alpha, fit.xs / alpha, fit.xb / alpha)

    @classmethod
    def with_share(cls, fit: TwinFit, f: ArrayLike, busy_share: float) -> _Activity:
        """The split fixed at ``busy_share``, ``alpha`` the least-squares match of the fit's
        activity ``x_stall + x_busy·u`` over the main sweep's clocks ``f``."""
        f = np.asarray(f, dtype=float)
        u = np.minimum(1.0, (fit.c / f) / _t_model(f, fit.tm, fit.c, fit.k))
        g = (1.0 - busy_share) + busy_share * u
        h = fit.xs + fit.xb * u
        alpha = float(np.sum(g * h) / np.sum(g * g))
        if not alpha > 0:
            return cls.of_fit(fit)
        return cls(alpha, 1.0 - busy_share, busy_share)


def _mem_time(fit: TwinFit, other: Sweep, k: float) -> Tuple[float, float]:
    """(memory part s, squared relative time error) at another memory clock with overlap
    exponent ``k``: the median of what each row's time leaves beyond the compute part."""
    parts = []
    for f_o, t_o in zip(other.clock_mhz, other.time_s):
        rest = t_o**k - (fit.c / f_o) ** k
        parts.append(rest ** (1.0 / k) if rest > 0 else 0.0)
    tm_o = float(np.median(parts))
    clocks = np.asarray(other.clock_mhz, dtype=float)
    times = np.asarray(other.time_s, dtype=float)
    err = float(np.sum((_t_model(clocks, tm_o, fit.c, k) / times - 1.0) ** 2))
    return tm_o, err


def _mem_deltas(
    fit: TwinFit, act: _Activity, other: Sweep, tm_o: float, k: float, floor: float
) -> Tuple[float, float]:
    """(memory power W, squared relative power error) at another memory clock whose memory
    part is ``tm_o``, overlap exponent ``k`` and voltage floor ``floor``: the memory power is
    the median of the rows' power minus the model's core power; the error is what that
    leaves."""
    probe = Workload("probe", fit.c, tm_o, k, act.a_stall, act.a_busy)
    curve = VoltageCurve(max(0.0, fit.ridge), fit.beta, floor)
    deltas, powers = [], []
    for f_o, p_o in zip(other.clock_mhz, other.power_w):
        u = probe.busy_fraction(f_o)
        dyn = curve.dynamic_w(f_o, act.alpha)
        deltas.append(p_o - (fit.p0 + dyn * (act.a_stall + act.a_busy * u)))
        powers.append(p_o)
    d = np.asarray(deltas)
    mem_w = float(np.median(d))
    return mem_w, float(np.sum(((d - mem_w) / np.asarray(powers)) ** 2))


#: the coarsest clock granularity of a driver's table: NVIDIA datacenter GPUs step their
#: graphics clocks by 15 MHz (A100, A40, H100; 7.5 MHz on V100). A sweep whose clocks all sit
#: on one grid this fine measured the board's own table (or part of it).
_MAX_TABLE_STEP_MHZ = 20.0


def _known_table(clocks: Sequence[float]) -> Optional[Tuple[float, ...]]:
    """The clocks of a catalog board's own table (one the catalog does not mark as inferred)
    that hold every measured clock, from the lowest measured clock to the highest; None when
    no board's table holds them all. A Jetson sweep of every devfreq step (the Nano's
    76.8 MHz, the Xavier NX's irregular table) is then the board's table, not a sample of it."""
    from governor.devices.sim.catalog import load_catalog

    for board in load_catalog().values():
        if any(str(item).startswith("clocks_mhz") for item in board.inferred):
            continue
        table = [float(c) for c in board.clocks_mhz]
        if all(any(abs(c - t) <= 0.005 for t in table) for c in clocks):
            return tuple(t for t in table if clocks[0] - 0.005 <= t <= clocks[-1] + 0.005)
    return None


def _clock_table(measured: Sequence[float]) -> Tuple[float, ...]:
    """The twin's clock table. A sweep whose clocks all belong to a catalog board's measured
    table gives that table over the sweep's span (:func:`_known_table`). Else a sweep on a
    driver's grid (every gap a multiple of the smallest, which is at most
    ``_MAX_TABLE_STEP_MHZ``: the A100 and A40 sweeps' 15 MHz) gives that grid from its lowest
    to its highest clock, gaps filled: halfway points would be clocks the board does not
    have. Any other sweep (sampled clocks: the Titan X's 38 MHz, the RTX A4000's ~180 MHz)
    gives the measured clocks plus the points halfway between neighbours. Either way the twin
    answers at clocks it was not measured at, unless the sweep measured every clock."""
    clocks = sorted(set(float(c) for c in measured))
    known = _known_table(clocks)
    if known is not None:
        return known
    gaps = [b - a for a, b in zip(clocks, clocks[1:])]
    step = min(gaps) if gaps else 0.0
    if 0 < step <= _MAX_TABLE_STEP_MHZ and all(
        abs(g / step - round(g / step)) * step <= 0.05 for g in gaps
    ):
        n = int(round((clocks[-1] - clocks[0]) / step))
        return tuple(round(clocks[0] + i * step, 3) for i in range(n + 1))
    out = set(clocks)
    for a, b in zip(clocks, clocks[1:]):
        out.add(round((a + b) / 2.0, 3))
    return tuple(sorted(out))


#: how far (in median clock steps of the sweep) a measured row's own departure from the
#: smoothed curve (its noise, as far as the smoother can tell) reaches: between measured
#: clocks at most this far apart it is interpolated linearly; across a wider gap it decays
#: linearly to the smooth curve over this distance from each side
NOISE_REACH_STEPS = 2.0


def _noise_at(
    clocks: np.ndarray, f_meas: np.ndarray, noise: np.ndarray, reach_mhz: float
) -> np.ndarray:
    """The measured rows' noise at ``clocks``: exact at measured clocks, linear between two
    measured clocks at most ``reach_mhz`` apart, decaying linearly to 0 over ``reach_mhz``
    from each side across wider gaps and beyond the ends."""
    out = np.zeros(len(clocks))
    for n, x in enumerate(clocks):
        j = int(np.searchsorted(f_meas, x))
        if j < len(f_meas) and abs(f_meas[j] - x) < 1e-9:
            out[n] = noise[j]
            continue
        lo, hi = j - 1, j  # the measured clocks either side of x (if any)
        gap = f_meas[hi] - f_meas[lo] if 0 <= lo and hi < len(f_meas) else math.inf
        span = gap if gap <= reach_mhz + 1e-9 else reach_mhz
        if span <= 0:
            continue
        if lo >= 0:
            out[n] += noise[lo] * max(0.0, 1.0 - (x - f_meas[lo]) / span)
        if hi < len(f_meas):
            out[n] += noise[hi] * max(0.0, 1.0 - (f_meas[hi] - x) / span)
    return out


def _factor_knots(
    table: Sequence[float],
    f_meas: ArrayLike,
    measured: ArrayLike,
    base: np.ndarray,
    res: Optional[Residuals],
    reach_steps: Optional[float],
    spread: Optional[ArrayLike] = None,
) -> Tuple[Tuple[float, float], ...]:
    """(clock_mhz, factor) knots at the table's and the measured clocks that make the twin
    answer the measured value at every measured clock: the smoothed residual
    (:class:`Residuals`, relative to the fit) plus each row's own remainder (its noise, as
    far as the smoother can tell), which reaches neighbouring table clocks only as
    :func:`_noise_at` says. ``base``: the board's own value at ``f_meas`` without factors;
    ``spread``: which rows' departures reach other clocks (default all; a capped row's
    departure is the cap, which the power limit models, so it stays at the row's clock)."""
    f_meas = np.asarray(f_meas, dtype=float)
    if len(f_meas) == 0:
        return ()
    clocks = np.array(sorted(set(float(x) for x in table) | set(f_meas.tolist())))
    smooth_meas = np.zeros(len(f_meas))
    smooth = np.zeros(len(clocks))
    if res is not None and res.share > 0:
        smooth_meas = np.log(res.factor(f_meas))
        smooth = np.log(res.factor(clocks))
    noise = np.log(np.asarray(measured, dtype=float) / np.maximum(base, 1e-300)) - smooth_meas
    if reach_steps is None:  # the smooth curve alone (the twin before measured rows were kept)
        noise = np.zeros_like(noise)
    gaps = np.diff(f_meas)
    step = float(np.median(gaps)) if len(gaps) else 0.0
    reach = (reach_steps or 0.0) * step
    spread = np.ones(len(f_meas), bool) if spread is None else np.asarray(spread, bool)
    total = smooth + _noise_at(clocks, f_meas[spread], noise[spread], reach)
    for x, v in zip(f_meas[~spread], noise[~spread]):
        total[np.searchsorted(clocks, x)] = smooth[np.searchsorted(clocks, x)] + v
    if not np.any(np.abs(total) > 0):
        return ()
    # beyond the table the factors hold their end values (physics.factor_at): two more knots
    # let the end rows' noise decay there too, to the smoothed residual at the ends
    depth = reach if reach > 0 else max(step, 1.0) * 1e-3
    knots = [(float(clocks[0]) - depth, float(smooth[0]))]
    knots += [(float(x), float(v)) for x, v in zip(clocks, total)]
    knots.append((float(clocks[-1]) + depth, float(smooth[-1])))
    return tuple((x, math.exp(v)) for x, v in knots)


def twin_board(
    sweeps: TwinSweeps,
    name: str = "twin",
    mem_floor_v: float = MEM_FLOOR_V,
    mem_overlap_k: float = MEM_OVERLAP_K,
    mem_busy_share: float = MEM_BUSY_SHARE,
    fit: Optional[TwinFit] = None,
    noise_reach_steps: Optional[float] = NOISE_REACH_STEPS,
) -> BoardSpec:
    """A :class:`BoardSpec` whose ``compute`` workload reproduces the sweep (fitted by
    :func:`fit_twin`; a power cap seen in the sweep becomes the board's power limit): the
    smooth model times the smoothed residual, times each measured row's own departure at its
    clock (:func:`_factor_knots`), so at a measured clock the twin answers the measured row.
    ``noise_reach_steps``: how far those departures reach (:data:`NOISE_REACH_STEPS`; None:
    not at all, the smooth twin).
    ``mem_floor_v``, ``mem_overlap_k``, ``mem_busy_share``: the priors of a lower memory
    clock (:data:`MEM_FLOOR_V`, :data:`MEM_OVERLAP_K`, :data:`MEM_BUSY_SHARE`);
    ``fit``: the main sweep's :func:`fit_twin`, when the caller already has it."""
    sw = sweeps.main
    f, p, t = (np.array(v, dtype=float) for v in (sw.clock_mhz, sw.power_w, sw.time_s))
    if fit is None:
        fit = fit_twin(f, p, t)
    k, tm, c = fit.k, fit.tm, fit.c
    ridge, beta, p0 = fit.ridge, fit.beta, fit.p0
    # the activity's split matters where the busy share moves: at another memory clock
    act = _Activity.with_share(fit, f, mem_busy_share) if sweeps.others else _Activity.of_fit(fit)
    voltage = VoltageCurve(max(0.0, ridge), beta)
    mem_ref = sweeps.mem_clock_mhz
    mem_power: Dict[float, float] = {}
    mem_points: Dict[float, float] = {}
    mem_floor: Dict[float, float] = {}
    mem_k: Dict[float, float] = {}
    if mem_ref is not None:
        mem_power[mem_ref] = 0.0
        mem_points[mem_ref] = tm
    for mem, other in sweeps.others.items():
        # the memory part at this memory clock from its rows (compute part unchanged), with
        # the overlap exponent its rows fit from three on, else the prior
        k_o = mem_overlap_k
        if len(other) >= _FLOOR_MIN_ROWS:
            k_o = min(_TWIN_KS, key=lambda kk: _mem_time(fit, other, kk)[1])
        tm_o = _mem_time(fit, other, k_o)[0]
        mem_points[mem] = tm_o
        mem_k[mem] = k_o
        # a lower memory clock lets the core voltage fall below the floor held at the main one:
        # fitted when enough rows there identify it, else the prior
        floor = 1.0
        if mem_ref is not None and mem < mem_ref and beta > 0:
            floor = mem_floor_v
            if len(other) >= _FLOOR_MIN_ROWS:
                floor = min(
                    _FLOOR_GRID, key=lambda fl: _mem_deltas(fit, act, other, tm_o, k_o, fl)[1]
                )
        if floor < 1.0:
            mem_floor[mem] = floor
        mem_power[mem] = _mem_deltas(fit, act, other, tm_o, k_o, floor)[0]
    table = _clock_table(sw.clock_mhz)
    workload = Workload(
        name="compute",
        compute_mcycles=c,
        mem_s=tm,
        overlap_k=k,
        a_stall=act.a_stall,
        a_busy=act.a_busy,
        mem_clock_mhz=mem_ref,
        mem_s_at=dict(mem_points) if len(mem_points) > 1 else {},
        overlap_k_at=mem_k,
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
    board = BoardSpec(
        name=name,
        display_name=f"twin of {Path(sw.path).name} ({sw.device})",
        kind="datacenter",
        clocks_mhz=table,
        static_w=max(0.0, p0),
        dyn_w_per_mhz=act.alpha,
        voltage=voltage,
        power_limit_w=fit.cap_w if math.isfinite(fit.cap_w) else 2.0 * float(p.max()) + 1.0,
        mem_clocks_mhz=mems,
        default_mem_clock_mhz=mem_ref,
        mem_static_w=mem_power if len(mem_power) > 1 else {},
        mem_floor_v=mem_floor,
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
    # every measured row, capped ones included: the cap being the highest capped row, each
    # runs at the clock asked for and answers the row; a clock the sweep did not measure
    # whose model power is above the cap is held at a lower table clock within it
    # (physics.BoardSpec.throttled_point), with sw_power_cap
    f_used, p_used, t_used = f, p, t
    spread = np.arange(len(f)) < len(f) - fit.capped_rows
    base_p = np.array([board.steady_gpu_power_w(x, workload, mem_ref) for x in f_used])
    base_t = np.array([workload.time_per_unit_s(x, mem_ref) for x in f_used])
    factors: Dict[str, Any] = {}  # Workload fields by name (time_factor, power_factor)
    for key, res, measured, base in (
        ("time_factor", fit.time_residuals, t_used, base_t),
        ("power_factor", fit.power_residuals, p_used, base_p),
    ):
        knots = _factor_knots(table, f_used, measured, base, res, noise_reach_steps, spread)
        if knots:
            factors[key] = knots
    if not factors:
        return board
    workload = replace(workload, **factors)
    return replace(board, workloads={"compute": workload, "memory": memory})
