"""Bench the block-size/clock procedures (Lopes et al. Alg. 2/4) against exhaustive search.

    python scripts/bench_blocks.py            # the whole table (about half a minute)
    python scripts/bench_blocks.py --quick    # two boards

Part 1: the RTX 4000 Ada recording (Kernel Tuner test data, 15 block sizes at 1080 MHz):
the best measured block the procedure finds and how many measurements it took.
Part 2: simulated boards, one kernel and 2-4 concurrent kernels of the sim kernel model:
the chosen point's true energy against the exhaustive optimum over (block sizes x clocks),
and the procedure's measurements as a share of the exhaustive count. Target: within 2 %
with at most 10 % of the measurements.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor.devices.registry import open_device  # noqa: E402
from governor.tuning.blocks import (  # noqa: E402
    KernelResources,
    default_blocks,
    exhaustive,
    rank_candidates,
    tune_energy,
    tune_energy_multi,
    tune_time,
)
from governor.tuning.blocks.bench import RecordedBench, SimBench  # noqa: E402
from governor.tuning.blocks.candidates import format_block  # noqa: E402
from governor.tuning.blocks.simkernels import EXAMPLE_KERNELS  # noqa: E402

ADA = ROOT / "tests" / "data" / "kernel_tuner" / "blocksize_energy_cache_RTX4000Ada.json"
BOARDS = ("a100-pcie", "h100-sxm", "rtx-a4000", "t4", "l4", "agx-orin", "xavier-nx")
SETS = (
    ("vector-add",),
    ("stencil-2d",),
    ("gemm-tile",),
    ("reduce",),
    ("nbody",),
    ("stencil-2d", "reduce"),
    ("vector-add", "gemm-tile", "nbody"),
    ("vector-add", "stencil-2d", "gemm-tile", "reduce"),
)


def recorded() -> None:
    bench = RecordedBench(ADA)
    full = exhaustive(bench, [bench.blocks()])
    print(
        f"RTX 4000 Ada recording ({bench.kernel_name}, CC 8.9, 16 registers assumed), exhaustive: "
        f"block {format_block(full.block)}, {full.energy_j:.5f} J, {full.measurements} measurements"
    )
    print(
        f"{'procedure':<12} {'threshold':>9} {'block':>6} {'energy_J':>9} {'gap_%':>6} {'measurements':>12}"
    )
    for threshold in (0.8, 0.5):
        cands = rank_candidates("8.9", KernelResources(16), bench.blocks(), threshold)
        for name, fn in (("alg2-energy", tune_energy), ("alg1-time", tune_time)):
            res = fn(bench, cands)
            gap = 100 * (res.energy_j / full.energy_j - 1)
            print(
                f"{name:<12} {threshold:>9.1f} {format_block(res.block):>6} {res.energy_j:>9.5f} {gap:>6.2f} {res.measurements:>12}"
            )
    print()


def simulated(boards) -> None:
    head = (
        f"{'board':<10} {'kernels':<40} {'chosen':<18} {'MHz':>7} {'meas':>5} "
        f"{'exhaustive':<18} {'MHz':>7} {'ex_meas':>10} {'meas_%':>7} {'gap_%':>6}  ok"
    )
    print(head)
    ok_count = rows = 0
    for board in boards:
        for names in SETS:
            with open_device(f"sim:{board}") as dev:
                models = [EXAMPLE_KERNELS[n] for n in names]
                cc = str(dev.board.facts["cc"])
                if len(models) > int(dev.board.facts["sms"]):
                    continue
                bench = SimBench(dev, models)
                cands, space = [], []
                for m in models:
                    r = KernelResources(
                        m.registers_per_thread, m.static_shared_bytes, m.shared_bytes_per_thread
                    )
                    cands.append(rank_candidates(cc, r))
                    space.append([c.block for c in rank_candidates(cc, r, default_blocks(), 0.0)])
                res = tune_energy_multi(bench, cands)
                best = exhaustive(bench, space)
                chosen = bench.truth(res.blocks, res.clock_mhz).energy_j
            gap = 100 * (chosen / best.energy_j - 1)
            share = 100 * res.measurements / best.measurements
            ok = gap <= 2.0 and share <= 10.0
            ok_count += ok
            rows += 1
            print(
                f"{board:<10} {'+'.join(names):<40} {','.join(format_block(b) for b in res.blocks):<18} "
                f"{res.clock_mhz:>7g} {res.measurements:>5} {','.join(format_block(b) for b in best.blocks):<18} "
                f"{best.clock_mhz:>7g} {best.measurements:>10} {share:>7.3f} {gap:>6.2f}  {'yes' if ok else 'NO'}"
            )
    print(
        f"\n{ok_count} of {rows} cases within 2 % of the exhaustive optimum with <= 10 % of its measurements"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two boards only")
    args = parser.parse_args()
    t0 = time.perf_counter()
    recorded()
    simulated(BOARDS[:1] + BOARDS[5:6] if args.quick else BOARDS)
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
