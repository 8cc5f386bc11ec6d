"""Cost of energy windows on simulated boards (not a timed test).

    python scripts/bench_energy_windows.py [--boards a,b] [--n 5000]

Each board runs in real time (``sim:NAME?realtime=1``, a wall clock, so the sampler thread of
boards without an energy counter runs as it would on hardware) with its compute load. The
table gives the median and 95th percentile time of one ``begin_window`` and one
``end_window`` (two windows open at once, nested), and how the energy is found.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import governor  # noqa: E402
from governor.devices.sim.catalog import board_names  # noqa: E402


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bench(board: str, n: int):
    dev = governor.open_device(f"sim:{board}?realtime=1")
    dev.run_workload("compute")
    meter = governor.EnergyMeter(dev)
    begins, ends = [], []
    meter.begin_window("outer")
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            meter.begin_window("step")
            t1 = time.perf_counter()
            w = meter.end_window("step")
            t2 = time.perf_counter()
            begins.append(t1 - t0)
            ends.append(t2 - t1)
        outer = meter.end_window("outer")
    finally:
        meter.close()
        dev.close()
    return begins, ends, w.method, outer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    parser.add_argument("--n", type=int, default=5000, help="windows per board")
    args = parser.parse_args()
    boards = [b for b in args.boards.split(",") if b] or list(board_names())
    print(
        "| board | method | begin median µs | begin p95 µs | end median µs | end p95 µs | ok (≤ 20 µs median) |"
    )
    print("|---|---|---:|---:|---:|---:|:-:|")
    worst = 0.0
    for board in boards:
        b, e, method, _ = bench(board, args.n)
        bm, em = statistics.median(b) * 1e6, statistics.median(e) * 1e6
        worst = max(worst, bm, em)
        ok = "yes" if max(bm, em) <= 20 else "NO"
        print(
            f"| {board} | {method} | {bm:.1f} | {pct(b, 0.95) * 1e6:.1f} | {em:.1f} | "
            f"{pct(e, 0.95) * 1e6:.1f} | {ok} |"
        )
    print(f"\nworst median: {worst:.1f} µs per begin or end")


if __name__ == "__main__":
    main()
