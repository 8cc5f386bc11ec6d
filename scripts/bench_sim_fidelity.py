#!/usr/bin/env python3
"""How well a twin (``twin:PATH``, governor/devices/sim/fit.py) predicts what it was NOT fitted on.

Three held-out measures, printed as tables (docs/simulator.md carries them):

(a) leave-one-clock-out: for every sweep in the replay folder, each measured clock in turn is
    left out, the twin is fitted to the others and predicts that clock's power and time (its
    neighbours' own departures from the fit included, as the twin interpolates them);
    Next to it, the noise floor: each interior row's scatter about the straight line
    through its two neighbours (divided by the spread that line's own noise adds), a bound
    from above on the measurement noise no fit can predict;
(b) cross-memory-clock: Titan X pairs ``titanx_<app>_mem3505.csv`` / ``_mem810.csv``; the twin
    is fitted to the whole 3505 MHz sweep plus ONE row at 810 MHz (the middle clock) and
    predicts the whole 810 MHz sweep (power, time, energy-optimal clock within one step); its
    voltage floor at 810 MHz (a prior) is chosen from the OTHER apps; "no probe" is the same
    without the 810 row (memory part scaled as 1/f_mem, memory power unchanged);
(c) twin vs replay: ``calibrate`` on the twin of each sweep and on the replay of the sweep;
    the chosen clocks are compared in the sweep's measured clock list: same clock, neighbour
    (at most one step of that list apart; a twin's pick halfway between two measured clocks is
    half a step from each) or other. Next to them, the twin's own energy optimum (its model
    evaluated at every table clock, throttling included): where calibration on the twin
    misses it, calibration missed the device's truth, not the twin the sweep's.
    ``--max-probes N`` gives both calibrations N probes (default 6, calibrate's own). A
    twin answers its sweep's rows at the measured clocks it runs (fit.py, "measured rows"),
    so agreement there is partly by construction; (a) and (b) are the held-out measures.

Run: ``python scripts/bench_sim_fidelity.py [--replay DIR] [--pairs DIR] [--parts abc]
[--max-probes N]``
(defaults: /work/shared/data/replay if present else tests/data/replay; tests/data/gpuptx_titanx).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor.devices.replay_files import nearest_index, read_sweep  # noqa: E402
from governor.devices.sim.fit import MEM_FLOOR_V, TwinSweeps, fit_twin, twin_board  # noqa: E402

SHARED = Path("/work/shared/data/replay")


def pct(values, q):
    values = sorted(values)
    if not values:
        return math.nan
    i = (len(values) - 1) * q
    lo, hi = int(math.floor(i)), int(math.ceil(i))
    return values[lo] + (values[hi] - values[lo]) * (i - lo)


def subset(sweep, keep):
    return sweep.rows(keep)


def predict(board, clock_mhz, mem_clock_mhz=None):
    """(power_w, time_s) the twin settles at when asked for ``clock_mhz``: where that would
    exceed the board's power limit (a cap the fit found), firmware runs a lower table clock,
    as on the device."""
    w = board.workloads["compute"]
    mem = mem_clock_mhz if mem_clock_mhz is not None else board.default_mem_clock_mhz
    run = clock_mhz
    if board.limited_power_w(board.steady_gpu_power_w(clock_mhz, w, mem)) > board.power_limit_w:
        run, _, _ = board.throttled_point(
            clock_mhz, board.ambient_c, w, board.power_limit_w, mem_clock_mhz=mem
        )
    return board.steady_gpu_power_w(run, w, mem), w.time_per_unit_s(run, mem)


def neighbour_scatter(clocks, values):
    """Per interior row, |relative deviation| (%) from the line through its two neighbours,
    divided by sqrt(1 + w² + (1 - w)²) (the line's own noise, w the row's position)."""
    out = []
    for i in range(1, len(clocks) - 1):
        w = (clocks[i] - clocks[i - 1]) / (clocks[i + 1] - clocks[i - 1])
        line = values[i - 1] + (values[i + 1] - values[i - 1]) * w
        out.append(abs(values[i] / line - 1) * 100 / math.sqrt(1 + w * w + (1 - w) ** 2))
    return out


def leave_one_out(files):
    print("## (a) leave-one-clock-out (each clock predicted by a twin fitted to the others)\n")
    print("| sweep | clocks | power median % | power worst % | time median % | time worst % |")
    print("|---|---|---|---|---|---|")
    all_p, all_t, noise_p, noise_t = [], [], [], []
    for path in files:
        sweep = read_sweep(path)
        n = len(sweep)
        noise_p += neighbour_scatter(sweep.clock_mhz, sweep.power_w)
        noise_t += neighbour_scatter(sweep.clock_mhz, sweep.time_s)
        ep, et = [], []
        for i in range(n):
            keep = set(range(n)) - {i}
            board = twin_board(TwinSweeps(subset(sweep, keep), None, {}))
            p, t = predict(board, sweep.clock_mhz[i])
            ep.append(abs(p / sweep.power_w[i] - 1) * 100)
            et.append(abs(t / sweep.time_s[i] - 1) * 100)
        all_p += ep
        all_t += et
        print(
            f"| {path.name} | {n} | {statistics.median(ep):.2f} | {max(ep):.2f} "
            f"| {statistics.median(et):.2f} | {max(et):.2f} |"
        )
    print(
        f"\nAll {len(all_p)} held-out points: power median {statistics.median(all_p):.2f} %, "
        f"p95 {pct(all_p, 0.95):.2f} %, worst {max(all_p):.2f} %; time median "
        f"{statistics.median(all_t):.2f} %, p95 {pct(all_t, 0.95):.2f} %, worst {max(all_t):.2f} %\n"
    )
    print(
        f"Noise floor ({len(noise_p)} interior rows, scatter about their neighbours): power median "
        f"{statistics.median(noise_p):.2f} %, p95 {pct(noise_p, 0.95):.2f} %; time median "
        f"{statistics.median(noise_t):.2f} %, p95 {pct(noise_t, 0.95):.2f} %\n"
    )
    return all_p, all_t


#: voltage floors at the lower memory clock tried for the prior (1.0: no floor change)
FLOORS = tuple(dict.fromkeys((1.0, 0.6, 0.65, 0.7, 0.75, MEM_FLOOR_V, 0.8, 0.85, 0.9)))


def _pairs(folder):
    for hi_path in sorted(folder.glob("titanx_*_mem3505.csv")):
        lo_path = hi_path.with_name(hi_path.name.replace("mem3505", "mem810"))
        if lo_path.exists():
            yield (
                hi_path.stem.split("_", 1)[1].rsplit("_", 1)[0],
                read_sweep(hi_path),
                read_sweep(lo_path),
            )


def _score_810(board, lo):
    """(power median %, time median %, true optimum index, twin optimum index) at 810 MHz."""
    preds = [predict(board, f, 810.0) for f in lo.clock_mhz]
    ep = [abs(p / m - 1) * 100 for (p, _), m in zip(preds, lo.power_w)]
    et = [abs(t / m - 1) * 100 for (_, t), m in zip(preds, lo.time_s)]
    energy = [p * t for p, t in preds]
    true_e = lo.energy_j()
    i_twin = min(range(len(energy)), key=energy.__getitem__)
    i_true = min(range(len(true_e)), key=true_e.__getitem__)
    return statistics.median(ep), statistics.median(et), i_true, i_twin


def cross_memory(folder):
    """The twin's voltage floor at the lower memory clock is a prior (fit.MEM_FLOOR_V): one
    row cannot tell it from the memory power. Held out, each app's floor is the median of the
    floors fitted (by power, as a twin does from three rows on) to the OTHER apps' whole
    810 MHz sweeps: never the app's own 810 MHz rows beyond its one probe, and never the
    optimum, which is what is scored."""
    print(
        "## (b) cross-memory-clock: fitted at 3505 MHz + one row at 810 MHz, predicting 810 MHz\n"
    )
    pairs = list(_pairs(folder))
    if not pairs:
        return []
    fits = {}
    for app, hi, _ in pairs:
        f, p, t = (np.array(v, dtype=float) for v in (hi.clock_mhz, hi.power_w, hi.time_s))
        fits[app] = fit_twin(f, p, t)
    probes = {"lowest": lambda n: 0, "middle": lambda n: n // 2, "highest": lambda n: n - 1}
    scores = {}  # (probe, app, floor) -> score
    for label, pick in probes.items():
        for app, hi, lo in pairs:
            j = pick(len(lo))
            for floor in FLOORS:
                board = twin_board(
                    TwinSweeps(hi, 3505.0, {810.0: subset(lo, {j})}),
                    mem_floor_v=floor,
                    fit=fits[app],
                )
                scores[label, app, floor] = _score_810(board, lo)
    apps = [app for app, _, _ in pairs]
    # each app's floor fitted to its whole 810 MHz sweep (the twin does so from 3 rows on)
    full_floor = {}
    for app, hi, lo in pairs:
        board = twin_board(TwinSweeps(hi, 3505.0, {810.0: lo}), fit=fits[app])
        full_floor[app] = board.mem_floor_v.get(810.0, 1.0)

    def held_out_floor(label, app):
        return statistics.median(full_floor[a] for a in apps if a != app)

    for label, pick in probes.items():
        for app, hi, lo in pairs:
            floor = held_out_floor(label, app)
            if (label, app, floor) not in scores:
                board = twin_board(
                    TwinSweeps(hi, 3505.0, {810.0: subset(lo, {pick(len(lo))})}),
                    mem_floor_v=floor,
                    fit=fits[app],
                )
                scores[label, app, floor] = _score_810(board, lo)

    print(
        "| app | probe MHz | floor (median of the other apps') | power median % | time median % "
        "| optimum true / twin MHz | within one step | no floor: power % | within one step "
        "| no probe: power % | time % | within one step |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for app, hi, lo in pairs:
        j = len(lo) // 2
        floor = held_out_floor("middle", app)
        pp, tt, i_true, i_twin = scores["middle", app, floor]
        ok = abs(i_true - i_twin) <= 1
        np_, _, nt_true, nt_twin = scores["middle", app, 1.0]
        nok = abs(nt_true - nt_twin) <= 1
        board = twin_board(TwinSweeps(hi, 3505.0, {}), fit=fits[app])
        bp, bt, b_true, b_twin = _score_810(board, lo)
        bok = abs(b_true - b_twin) <= 1
        rows.append((pp, tt, ok, bp, bt, bok, np_, nok))
        print(
            f"| {app} | {lo.clock_mhz[j]:g} | {floor:g} | {pp:.1f} | {tt:.1f} | {lo.clock_mhz[i_true]:g} / "
            f"{lo.clock_mhz[i_twin]:g} | {'yes' if ok else 'no'} | {np_:.1f} | {'yes' if nok else 'no'} "
            f"| {bp:.1f} | {bt:.1f} | {'yes' if bok else 'no'} |"
        )
    n = len(rows)
    med = lambda i: statistics.median(r[i] for r in rows)  # noqa: E731
    print(
        f"\n{n} apps. With the 810 MHz probe and the held-out floor: power median of medians "
        f"{med(0):.1f} %, time {med(1):.1f} %, optimum within one step in {sum(r[2] for r in rows)}/{n}. "
        f"Probe without a floor (the same voltage curve at both memory clocks): power {med(6):.1f} %, "
        f"within one step {sum(r[7] for r in rows)}/{n}. No probe: power {med(3):.1f} %, "
        f"time {med(4):.1f} %, within one step {sum(r[5] for r in rows)}/{n}.\n"
    )
    print(
        "Floors fitted to each app's whole 810 MHz sweep (what the held-out floors are medians "
        "of): " + ", ".join(f"{a} {full_floor[a]:g}" for a in apps) + "\n"
    )
    shipped = MEM_FLOOR_V
    print(
        f"The shipped prior (fit.MEM_FLOOR_V = {shipped:g}, the median of those floors over all "
        "apps: in-sample for this table) and fixed floors score (in-sample, not claimed): "
        + "; ".join(
            f"floor {fl:g}: power {statistics.median(scores['middle', a, fl][0] for a in apps):.1f} %, "
            f"within one step {sum(abs(scores['middle', a, fl][2] - scores['middle', a, fl][3]) <= 1 for a in apps)}/{n}"
            for fl in FLOORS
        )
        + "\n"
    )
    print("The same with the one 810 MHz row taken at other clocks (floor held out as above):\n")
    print("| probe row | power median % | time median % | optimum within one step |")
    print("|---|---|---|---|")
    for label in probes:
        got = [scores[label, app, held_out_floor(label, app)] for app in apps]
        print(
            f"| {label} | {statistics.median(g[0] for g in got):.1f} "
            f"| {statistics.median(g[1] for g in got):.1f} "
            f"| {sum(abs(g[2] - g[3]) <= 1 for g in got)}/{n} |"
        )
    print()
    return rows


def step_position(clocks, clock_mhz):
    """Where ``clock_mhz`` sits in the measured clock list, in steps of that list (fractional
    between two measured clocks): a twin may pick a clock halfway between two measured ones,
    which is half a step from each, not whichever one a tie-break rounds it to."""
    clocks = list(clocks)
    if clock_mhz <= clocks[0]:
        return 0.0
    for i in range(1, len(clocks)):
        if clock_mhz <= clocks[i]:
            return i - 1 + (clock_mhz - clocks[i - 1]) / (clocks[i] - clocks[i - 1])
    return float(len(clocks) - 1)


def twin_optimum_mhz(board):
    """The twin's own energy-optimal table clock: its model's energy per run at every clock,
    at the clock the firmware holds under the power limit (a cool die: the twin has no
    leakage)."""
    work = board.workloads["compute"]

    def energy_j(clock_mhz):
        held_mhz, _, power_w = board.throttled_point(clock_mhz, 40.0, work, board.power_limit_w)
        return power_w * work.time_per_unit_s(held_mhz)

    return min(board.clocks_mhz, key=energy_j)


def twin_vs_replay(files, max_probes=6):
    from governor.calibrate.loads import make_load
    from governor.calibrate.procedure import DeviceProber, ReplayProber, calibrate
    from governor.devices.registry import open_device
    from governor.devices.sim.fit import read_twin_sweeps
    from governor.errors import GovernorError

    print(
        f"## (c) calibrate on the twin vs calibrate on the replay of its sweep ({max_probes} probes)\n"
    )
    print(
        "| sweep | measured best MHz | twin's own optimum MHz | replay picks MHz "
        "| twin picks MHz | verdict | measured energy at replay's / twin's pick, % above best |"
    )
    print("|---|---|---|---|---|---|---|")
    verdicts, near_best, rep_near_best, costs, own_near = [], 0, 0, [], 0
    for path in files:
        sweep = read_sweep(path)
        energy = sweep.energy_j()
        i_best = min(range(len(energy)), key=energy.__getitem__)
        try:
            own = twin_optimum_mhz(twin_board(read_twin_sweeps(path)))
            with open_device(f"replay:{path}") as dev:
                rep = calibrate(ReplayProber(dev), max_probes=max_probes).ppw_optimal_clock_mhz
            with open_device(f"twin:{path}") as dev:
                prober = DeviceProber(dev, make_load(dev, "builtin"))
                twin = calibrate(prober, max_probes=max_probes).ppw_optimal_clock_mhz
        except GovernorError as err:
            print(f"| {path.name} | error: {err} | | | | other |")
            verdicts.append("other")
            continue
        i_rep, i_twin = nearest_index(sweep.clock_mhz, rep), nearest_index(sweep.clock_mhz, twin)
        d = abs(step_position(sweep.clock_mhz, rep) - step_position(sweep.clock_mhz, twin))
        verdict = "same" if d < 1e-9 else "neighbour" if d <= 1 + 1e-9 else "other"
        verdicts.append(verdict)
        near_best += abs(step_position(sweep.clock_mhz, twin) - i_best) <= 1 + 1e-9
        rep_near_best += abs(step_position(sweep.clock_mhz, rep) - i_best) <= 1 + 1e-9
        own_near += abs(step_position(sweep.clock_mhz, own) - i_best) <= 1 + 1e-9
        cost = [100 * (energy[i] / energy[i_best] - 1) for i in (i_rep, i_twin)]
        costs.append(cost)
        print(
            f"| {path.name} | {sweep.clock_mhz[i_best]:g} | {own:g} | {rep:g} | {twin:g} | {verdict} "
            f"| {cost[0]:.1f} / {cost[1]:.1f} |"
        )
    n = len(verdicts)
    good = sum(v != "other" for v in verdicts)
    print(
        f"\n{n} sweeps: same {verdicts.count('same')}, neighbour {verdicts.count('neighbour')}, "
        f"other {verdicts.count('other')}; same or neighbour {good}/{n} ({100 * good / max(n, 1):.0f} %). "
        f"The twin's pick is within one step of the sweep's measured best clock in {near_best}/{n}, "
        f"the replay's in {rep_near_best}/{n}; measured energy above the best, mean over the "
        f"sweeps: {statistics.mean(c[0] for c in costs):.2f} % at the replay's picks, "
        f"{statistics.mean(c[1] for c in costs):.2f} % at the twin's. The twin's own optimum is "
        f"within one step of the measured best in {own_near}/{n} (in-sample: the fit keeps it "
        "within one clock of the measured one).\n"
    )
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = SHARED if SHARED.is_dir() else ROOT / "tests" / "data" / "replay"
    parser.add_argument("--replay", type=Path, default=default)
    parser.add_argument("--pairs", type=Path, default=ROOT / "tests" / "data" / "gpuptx_titanx")
    parser.add_argument("--skip-calibrate", action="store_true", help="the same as --parts ab")
    parser.add_argument(
        "--parts", default="abc", help="which measures to run: any of a, b, c (default abc)"
    )
    parser.add_argument(
        "--max-probes", type=int, default=6, help="(c): probes per calibration (default 6)"
    )
    args = parser.parse_args()
    parts = set(args.parts) - ({"c"} if args.skip_calibrate else set())
    files = sorted(args.replay.glob("*.csv"))
    if "a" in parts:
        leave_one_out(files)
    if "b" in parts:
        cross_memory(args.pairs)
    if "c" in parts:
        twin_vs_replay(files, args.max_probes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
