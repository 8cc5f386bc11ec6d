#!/usr/bin/env python3
"""How well a twin (``twin:PATH``, governor/devices/sim/fit.py) predicts what it was NOT fitted on.

Three held-out measures, printed as tables (docs/simulator.md carries them):

(a) leave-one-clock-out: for every sweep in the replay folder, each measured clock in turn is
    left out, the twin is fitted to the others and predicts that clock's power and time;
(b) cross-memory-clock: Titan X pairs ``titanx_<app>_mem3505.csv`` / ``_mem810.csv``; the twin
    is fitted to the whole 3505 MHz sweep plus ONE row at 810 MHz (the middle clock) and
    predicts the whole 810 MHz sweep (power, time, energy-optimal clock within one step);
    "no probe" is the same without the 810 row (memory part scaled as 1/f_mem, memory power
    unchanged): what the simulator did before;
(c) twin vs replay: ``calibrate`` on the twin of each sweep and on the replay of the sweep;
    the chosen clocks are compared in the sweep's clock table (same / neighbour / other).

Run: ``python scripts/bench_sim_fidelity.py [--replay DIR] [--pairs DIR] [--skip-calibrate]``
(defaults: /work/shared/data/replay if present else tests/data/replay; tests/data/gpuptx_titanx).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor.devices.replay_files import nearest_index, read_sweep  # noqa: E402
from governor.devices.sim.fit import TwinSweeps, twin_board  # noqa: E402

SHARED = Path("/work/shared/data/replay")


def pct(values, q):
    values = sorted(values)
    if not values:
        return math.nan
    i = (len(values) - 1) * q
    lo, hi = int(math.floor(i)), int(math.ceil(i))
    return values[lo] + (values[hi] - values[lo]) * (i - lo)


def subset(sweep, keep):
    def pick(xs):
        return tuple(x for i, x in enumerate(xs) if i in keep)

    return replace(
        sweep,
        clock_mhz=pick(sweep.clock_mhz),
        requested_mhz=pick(sweep.requested_mhz),
        power_w=pick(sweep.power_w),
        time_s=pick(sweep.time_s),
    )


def predict(board, clock_mhz, mem_clock_mhz=None):
    w = board.workloads["compute"]
    return (
        board.steady_gpu_power_w(clock_mhz, w, mem_clock_mhz),
        w.time_per_unit_s(clock_mhz, mem_clock_mhz),
    )


def leave_one_out(files):
    print("## (a) leave-one-clock-out (each clock predicted by a twin fitted to the others)\n")
    print("| sweep | clocks | power median % | power worst % | time median % | time worst % |")
    print("|---|---|---|---|---|---|")
    all_p, all_t = [], []
    for path in files:
        sweep = read_sweep(path)
        n = len(sweep)
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
    return all_p, all_t


def cross_memory(folder):
    print(
        "## (b) cross-memory-clock: fitted at 3505 MHz + one row at 810 MHz, predicting 810 MHz\n"
    )
    print(
        "| app | probe MHz | power median % | time median % | optimum true / twin MHz | within one step "
        "| no probe: power % | time % | within one step |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for hi_path in sorted(folder.glob("titanx_*_mem3505.csv")):
        lo_path = hi_path.with_name(hi_path.name.replace("mem3505", "mem810"))
        if not lo_path.exists():
            continue
        hi, lo = read_sweep(hi_path), read_sweep(lo_path)
        j = len(lo) // 2
        result = []
        for others in ({810.0: subset(lo, {j})}, {}):
            board = twin_board(TwinSweeps(hi, 3505.0, others))
            preds = [predict(board, f, 810.0) for f in lo.clock_mhz]
            ep = [abs(p / m - 1) * 100 for (p, _), m in zip(preds, lo.power_w)]
            et = [abs(t / m - 1) * 100 for (_, t), m in zip(preds, lo.time_s)]
            energy = [p * t for p, t in preds]
            i_twin = min(range(len(energy)), key=energy.__getitem__)
            true_e = lo.energy_j()
            i_true = min(range(len(true_e)), key=true_e.__getitem__)
            result.append(
                (
                    statistics.median(ep),
                    statistics.median(et),
                    i_true,
                    i_twin,
                    abs(i_true - i_twin) <= 1,
                )
            )
        (pp, tt, i_true, i_twin, ok), (bp, bt, _, _, bok) = result
        rows.append((pp, tt, ok, bp, bt, bok))
        app = hi_path.stem.split("_", 1)[1].rsplit("_", 1)[0]
        print(
            f"| {app} | {lo.clock_mhz[j]:g} | {pp:.1f} | {tt:.1f} | {lo.clock_mhz[i_true]:g} / "
            f"{lo.clock_mhz[i_twin]:g} | {'yes' if ok else 'no'} | {bp:.1f} | {bt:.1f} | {'yes' if bok else 'no'} |"
        )
    if rows:
        n = len(rows)
        print(
            f"\n{n} apps. With the 810 MHz probe: power median of medians "
            f"{statistics.median(r[0] for r in rows):.1f} %, time {statistics.median(r[1] for r in rows):.1f} %, "
            f"optimum within one step in {sum(r[2] for r in rows)}/{n}. Without it: power "
            f"{statistics.median(r[3] for r in rows):.1f} %, time {statistics.median(r[4] for r in rows):.1f} %, "
            f"within one step {sum(r[5] for r in rows)}/{n}.\n"
        )
        print("The same with the one 810 MHz row taken at other clocks:\n")
        print("| probe row | power median % | time median % | optimum within one step |")
        print("|---|---|---|---|")
        for label in ("lowest", "middle", "highest"):
            pw, tw, ok = [], [], 0
            for hi_path in sorted(folder.glob("titanx_*_mem3505.csv")):
                lo_path = hi_path.with_name(hi_path.name.replace("mem3505", "mem810"))
                if not lo_path.exists():
                    continue
                hi, lo = read_sweep(hi_path), read_sweep(lo_path)
                j = {"lowest": 0, "middle": len(lo) // 2, "highest": len(lo) - 1}[label]
                board = twin_board(TwinSweeps(hi, 3505.0, {810.0: subset(lo, {j})}))
                preds = [predict(board, f, 810.0) for f in lo.clock_mhz]
                pw.append(
                    statistics.median(abs(p / m - 1) * 100 for (p, _), m in zip(preds, lo.power_w))
                )
                tw.append(
                    statistics.median(abs(t / m - 1) * 100 for (_, t), m in zip(preds, lo.time_s))
                )
                energy = [p * t for p, t in preds]
                true_e = lo.energy_j()
                i_twin = min(range(len(energy)), key=energy.__getitem__)
                i_true = min(range(len(true_e)), key=true_e.__getitem__)
                ok += abs(i_twin - i_true) <= 1
            print(
                f"| {label} | {statistics.median(pw):.1f} | {statistics.median(tw):.1f} | {ok}/{len(pw)} |"
            )
        print()
    return rows


def twin_vs_replay(files):
    from governor.calibrate.loads import make_load
    from governor.calibrate.procedure import DeviceProber, ReplayProber, calibrate
    from governor.devices.registry import open_device
    from governor.errors import GovernorError

    print("## (c) calibrate on the twin vs calibrate on the replay of its sweep\n")
    print("| sweep | replay picks MHz | twin picks MHz | verdict |")
    print("|---|---|---|---|")
    verdicts = []
    for path in files:
        sweep = read_sweep(path)
        try:
            with open_device(f"replay:{path}") as dev:
                rep = calibrate(ReplayProber(dev)).ppw_optimal_clock_mhz
            with open_device(f"twin:{path}") as dev:
                twin = calibrate(DeviceProber(dev, make_load(dev, "builtin"))).ppw_optimal_clock_mhz
        except GovernorError as err:
            print(f"| {path.name} | error: {err} | | other |")
            verdicts.append("other")
            continue
        d = abs(nearest_index(sweep.clock_mhz, rep) - nearest_index(sweep.clock_mhz, twin))
        verdict = "same" if d == 0 else "neighbour" if d == 1 else "other"
        verdicts.append(verdict)
        print(f"| {path.name} | {rep:g} | {twin:g} | {verdict} |")
    n = len(verdicts)
    good = sum(v != "other" for v in verdicts)
    print(
        f"\n{n} sweeps: same {verdicts.count('same')}, neighbour {verdicts.count('neighbour')}, "
        f"other {verdicts.count('other')}; same or neighbour {good}/{n} ({100 * good / max(n, 1):.0f} %)\n"
    )
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = SHARED if SHARED.is_dir() else ROOT / "tests" / "data" / "replay"
    parser.add_argument("--replay", type=Path, default=default)
    parser.add_argument("--pairs", type=Path, default=ROOT / "tests" / "data" / "gpuptx_titanx")
    parser.add_argument("--skip-calibrate", action="store_true")
    args = parser.parse_args()
    files = sorted(args.replay.glob("*.csv"))
    leave_one_out(files)
    cross_memory(args.pairs)
    if not args.skip_calibrate:
        twin_vs_replay(files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
