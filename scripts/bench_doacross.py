"""Time the DOACROSS model's exhaustive layout search beside Di & Xue's reported figures.

    python scripts/bench_doacross.py            # all three SOR nests, best of 3 runs
    python scripts/bench_doacross.py --repeat 1 --nest sor1d

The paper searched 3x10^6 / 3.2x10^6 / 4.7x10^6 layouts of 1-D / 2-D / 3-D SOR in
238 / 369 / 503 s (Tesla C1060 host, Xeon 2.0 GHz). Problem sizes and per-dimension tile caps
below are chosen so this search covers about as many layouts (tile size x threads per block).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from governor.tuning.analytic import catalog  # noqa: E402
from governor.tuning.analytic.doacross import doacross_search  # noqa: E402

# nest -> (space sizes, steps, per-dimension tile caps, paper layouts, paper seconds)
CASES = {
    "sor1d": ((100_000,), 10_000, [1536, 1536], 3.0e6, 238.0),
    "sor2d": ((512, 512), 512, [90, 90, 90], 3.2e6, 369.0),
    "sor3d": ((128, 128, 128), 128, [38, 38, 38, 38], 4.7e6, 503.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nest", choices=sorted(CASES), action="append")
    parser.add_argument("--gpu", default="c1060")
    parser.add_argument("--repeat", type=int, default=3, help="runs per nest; the best counts")
    args = parser.parse_args()
    gpu = catalog.doacross_gpu(args.gpu)
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, GPU model {gpu.name}")  # fmt: skip
    header = ("| nest | problem | layouts | search (s) | layouts/s | paper layouts "
              "| paper (s) | speed-up per layout |")  # fmt: skip
    print(header)
    print("|" + "---|" * 8)
    for name in args.nest or sorted(CASES):
        size, steps, caps, paper_n, paper_s = CASES[name]
        best = None
        for _ in range(max(1, args.repeat)):
            start = time.perf_counter()
            res = doacross_search(catalog.nest(name), gpu, size, steps, caps=caps)
            wall = time.perf_counter() - start
            best = wall if best is None else min(best, wall)
        rate = res.layouts_searched / best
        speedup = (paper_s / paper_n) / (best / res.layouts_searched)
        problem = "x".join(str(s) for s in size) + f" x {steps} steps"
        print(f"| {name} | {problem} | {res.layouts_searched:,} | {best:.2f} | {rate:,.0f} "
              f"| {paper_n:,.0f} | {paper_s:.0f} | {speedup:,.0f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
