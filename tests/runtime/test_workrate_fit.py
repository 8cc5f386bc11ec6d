"""The work-rate fit keeps running sums per run and fits two lines through them in plain
arithmetic every period (no lists per fit): it must give what a batch weighted
least-squares fit of all the periods seen gives, on random data. The batch fit here is
written independently: per-run totals summed afresh (``math.fsum``) and each line solved
by numpy's least squares on the sqrt-weighted points."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from battery_helpers import model_of

from governor.runtime.workrate import PhaseFit


def _wls(xs, ys, ws):
    """Weighted least squares ``y = slope·x + intercept`` (numpy, from the points)."""
    sq = np.sqrt(np.asarray(ws, dtype=float))
    design = np.column_stack([np.asarray(xs, dtype=float), np.ones(len(xs))]) * sq[:, None]
    (slope, intercept), *_ = np.linalg.lstsq(design, np.asarray(ys, dtype=float) * sq, rcond=None)
    return float(slope), float(intercept)


def batch_fit(model, periods):
    """``(A, B, a, b)`` from every period ``(run, clock, dt, units, power)``, recomputed from
    scratch: PhaseFit's documented rules on a batch least-squares fit."""
    runs = {}
    for run, clock, dt, units, power in periods:
        i = model.index(clock)
        runs.setdefault(run, []).append(
            (dt, units, power * dt, model.time_rel[i] * dt, model.power_w[i] * dt)
        )
    rows = [[math.fsum(col) for col in zip(*pts)] for pts in runs.values()]
    used = [r for r in rows if r[1] >= PhaseFit.MIN_UNITS and r[0] >= PhaseFit.MIN_S]
    if len(used) < 2:
        return None
    ws = [r[0] for r in used]
    xs = [r[3] / r[0] for r in used]
    if max(xs) - min(xs) < PhaseFit.MIN_SPREAD * sum(xs) / len(xs):
        return None
    ys = [r[0] / r[1] for r in used]
    A, B = _wls(xs, ys, ws)
    sw = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs)) / sw
    my = sum(w * y for w, y in zip(ws, ys)) / sw
    if A <= 0:
        A = 1e-3 * my / mx
        B = my - A * mx
    elif B < 0:
        A, B = my / mx, 0.0
    if B > 0:  # B within its counting error (a unit per run) is not measured
        sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
        var = sum(
            (w * (1.0 / sw - mx * (x - mx) / sxx) * y / r[1]) ** 2
            for w, x, y, r in zip(ws, xs, ys, used)
        )
        if B * B <= var:
            A, B = my / mx, 0.0
    dyn = [r[4] / r[0] - model.idle_w for r in used]
    ps = [r[2] / r[0] for r in used]
    b, a = _wls(dyn, ps, ws)
    if not b > 0:
        b = 1e-3
        pm = sum(w * p for w, p in zip(ws, ps)) / sw
        dm = sum(w * d for w, d in zip(ws, dyn)) / sw
        a = pm - b * dm
    return A, B, a, b


def _random_periods(rng, model, n_run):
    """Two probe runs 20-40 % apart in relative time and a dithered run, a load of random
    memory share ticking whole units, its power a random line in the model's."""
    n = len(model.clocks_mhz)
    lo = rng.randrange(0, n // 2)
    hi = min(n - 1, lo + rng.randrange(max(2, n // 5), max(3, n // 2)))
    A, B = rng.uniform(0.01, 0.06), rng.uniform(0.0, 0.05)
    a, b = rng.uniform(5.0, 40.0), rng.uniform(0.3, 1.5)
    periods, done = [], 0.0
    plan = [("lo", lo)] * rng.randrange(30, 80) + [("hi", hi)] * rng.randrange(30, 80)
    mid = rng.randrange(lo, hi + 1)
    plan += [("run", min(n - 1, mid + rng.randrange(0, 2))) for _ in range(n_run)]
    for run, i in plan:
        dt = rng.uniform(0.09, 0.11)
        rate = 1.0 / (A * model.time_rel[i] + B)
        before = math.floor(done)
        done += dt * rate * rng.uniform(0.9, 1.1)
        units = float(math.floor(done) - before)
        power = (a + b * (model.power_w[i] - model.idle_w)) * rng.uniform(0.97, 1.03)
        periods.append((run, model.clocks_mhz[i], dt, units, power))
    return periods


@pytest.mark.parametrize("board", ["a100-sxm", "agx-orin"])
def test_the_running_fit_agrees_with_a_batch_fit_on_random_data(profile_of, board):
    model = model_of(profile_of, board)
    rng = random.Random(20261125)
    fitted = kept_memory = 0
    for trial in range(150):
        fit = PhaseFit(model)
        periods = _random_periods(rng, model, rng.randrange(0, 400))
        for k, p in enumerate(periods):
            fit.add(*p)
            if k % 37 == 0 or k == len(periods) - 1:  # fitted along the way, as each period
                got, want = fit.fit(), batch_fit(model, periods[: k + 1])
                assert (got is None) == (want is None), (trial, k)
                if got is None:
                    continue
                fitted += 1
                kept_memory += got[1] > 0
                for g, w in zip(got, want):
                    assert g == pytest.approx(w, rel=1e-7, abs=1e-12), (trial, k, got, want)
    # the data reach both the fitted and the not-fitted cases, and both sides of the
    # memory-time rule (B kept, B dropped within its counting error)
    assert fitted > 200
    assert 0 < kept_memory < fitted


def test_a_fit_is_recomputed_after_each_period_and_kept_between(profile_of):
    model = model_of(profile_of, "agx-orin")
    fit = PhaseFit(model)
    periods = _random_periods(random.Random(7), model, 100)
    for p in periods:
        fit.add(*p)
    first = fit.fit()
    assert first is not None and fit.fit() is first  # no new period: the same fit
    run, clock, dt, units, power = periods[-1]
    fit.add(run, clock, dt, units + 3.0, power * 1.5)
    second = fit.fit()
    assert second != first
    assert second == pytest.approx(
        batch_fit(model, periods + [(run, clock, dt, units + 3.0, power * 1.5)]), rel=1e-7
    )
