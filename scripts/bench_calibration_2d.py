#!/usr/bin/env python3
"""Bench the two-dimensional calibration: the (core, memory) pair it chooses against brute force.

Prints two markdown tables (docs/benchmarks/calibration-2d.md keeps the latest):

1. every simulated board with a memory axis (several memory clocks), built-in (compute) and
   memory loads: ``governor calibrate``'s procedure (the core calibration at the default
   memory clock, then the pair search of ``governor/calibrate/pairs.py`` on the board's
   input power, the module's on a datacenter GPU), on the simulated device with its sensor
   noise; the chosen pair's true steady-state energy per unit against the least over every
   (core, memory) pair of the tables, and the pair probes taken (at most 10);
2. the real GTX Titan X sweeps (tests/data/replay/titanx_<app>_mem{810,3505}.csv, gpuPTXModel,
   INESC-ID, BSD-3-Clause): the core calibration on the 3505 MHz sweep, then the pair search
   whose probes read the measured rows (the rows it does not probe stay held out); the
   chosen pair's measured energy per run against the least measured.

Run from the repository root: ``python scripts/bench_calibration_2d.py [--boards a,b]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import governor  # noqa: E402
from governor.calibrate.loads import make_load  # noqa: E402
from governor.calibrate.pairs import MAX_PAIR_PROBES, PairProber, search_pairs  # noqa: E402
from governor.calibrate.procedure import DeviceProber, ReplayProber, calibrate  # noqa: E402
from governor.devices.replay_files import read_sweep  # noqa: E402
from governor.devices.sim.catalog import load_catalog  # noqa: E402

REPLAY = ROOT / "tests" / "data" / "replay"


def true_energy(board, workload, clock, mem):
    gpu = board.steady_gpu_power_w(clock, workload, mem)
    return board.board_power_w(gpu) * workload.time_per_unit_s(clock, mem)


def sim_rows(names):
    rows = []
    for name, board in load_catalog().items():
        if len(board.mem_clocks_mhz) < 2 or (names and name not in names):
            continue
        for load_name in ("builtin", "memory"):
            with governor.open_device(f"sim:{name}") as dev:
                load = make_load(dev, load_name)
                result = calibrate(DeviceProber(dev, load))
                prober = PairProber(dev, load)
                try:
                    pair = search_pairs(
                        prober,
                        dev.supported_clocks_mhz(),
                        dev.supported_mem_clocks_mhz(),
                        result.ppw_optimal_clock_mhz,
                        board.default_mem_clock_mhz,
                    )
                finally:
                    prober.finish()
                workload = dev.board.workloads["compute" if load_name == "builtin" else "memory"]
                clocks = dev.supported_clocks_mhz()
            grid = {
                (f, m): true_energy(board, workload, f, m)
                for f in clocks
                for m in board.mem_clocks_mhz
            }
            (bf, bm), best = min(grid.items(), key=lambda kv: kv[1])
            chosen = grid[(pair.clock_mhz, pair.mem_clock_mhz)]
            default = grid[(result.ppw_optimal_clock_mhz, board.default_mem_clock_mhz)]
            rows.append(
                (
                    name,
                    load_name,
                    f"{pair.clock_mhz:g}/{pair.mem_clock_mhz:g}",
                    f"{bf:g}/{bm:g}",
                    100 * (chosen / best - 1),
                    100 * (1 - chosen / default),
                    len(pair.probes),
                )
            )
            print(
                f"  {name} {load_name}: chosen {pair.clock_mhz:g}/{pair.mem_clock_mhz:g}, "
                f"best {bf:g}/{bm:g}, +{100 * (chosen / best - 1):.2f} %",
                file=sys.stderr,
                flush=True,
            )
    return rows


def titan_rows():
    rows = []
    apps = sorted({p.name.split("_")[1] for p in REPLAY.glob("titanx_*_mem810.csv")})
    for app in apps:
        tables = {}
        for mem in (810.0, 3505.0):
            sweep = read_sweep(REPLAY / f"titanx_{app}_mem{mem:g}.csv")
            tables[mem] = {
                float(c): (float(p), float(t))
                for c, p, t in zip(sweep.requested_mhz, sweep.power_w, sweep.time_s)
            }
        with governor.open_device(f"replay:{REPLAY / f'titanx_{app}_mem3505.csv'}") as dev:
            start = calibrate(ReplayProber(dev), measure_idle=False).ppw_optimal_clock_mhz
        clocks = sorted(set(tables[810.0]) & set(tables[3505.0]))

        def probe(f, m, tables=tables):
            return tables[m][f]

        pair = search_pairs(probe, clocks, [810.0, 3505.0], start, 3505.0)
        energy = {(f, m): tables[m][f][0] * tables[m][f][1] for f in clocks for m in tables}
        (bf, bm), best = min(energy.items(), key=lambda kv: kv[1])
        chosen = energy[(pair.clock_mhz, pair.mem_clock_mhz)]
        rows.append(
            (
                app,
                f"{pair.clock_mhz:g}/{pair.mem_clock_mhz:g}",
                f"{bf:g}/{bm:g}",
                100 * (chosen / best - 1),
                100 * (1 - chosen / energy[(start, 3505.0)]),
                len(pair.probes),
            )
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated simulated boards")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    names = {b for b in args.boards.split(",") if b}
    sims = sim_rows(names)
    print("### Simulated boards with a memory axis (board-input energy; module on a GPU)\n")
    print(
        "| board | load | chosen core/mem MHz | best (brute force) | energy above best | "
        "saved vs core-only | pair probes |"
    )
    print("|---|---|---|---|---:|---:|---:|")
    for n, ld, c, b, over, saved, k in sims:
        print(f"| {n} | {ld} | {c} | {b} | {over:.2f} % | {saved:.1f} % | {k} |")
    worst = max((r[4] for r in sims), default=0.0)
    most = max((r[6] for r in sims), default=0)
    print(
        f"\nworst {worst:.2f} % above the best pair; at most {most} pair probes "
        f"(limit {MAX_PAIR_PROBES})\n"
    )
    titan = titan_rows()
    print("### GTX Titan X, real sweeps at 810 and 3505 MHz memory (measured energy per run)\n")
    print(
        "| app | chosen core/mem MHz | best measured | energy above best | "
        "saved vs core-only | pair probes |"
    )
    print("|---|---|---|---:|---:|---:|")
    for app, c, b, over, saved, k in titan:
        print(f"| {app} | {c} | {b} | {over:.2f} % | {saved:.1f} % | {k} |")
    worst_t = max((r[3] for r in titan), default=0.0)
    print(f"\nworst {worst_t:.2f} % above the best measured pair")
    ok = worst <= 1.0 and most <= MAX_PAIR_PROBES and worst_t <= 2.0
    print("targets (<= 1 % simulated, <= 10 probes, <= 2 % Titan X):", "met" if ok else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
