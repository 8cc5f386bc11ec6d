"""On a CUDA GPU: every library kernel against NumPy, then timed, at several configurations.

    python scripts/gpu_check_kernels.py [--repeats N] [--json FILE]

For each kernel: the tiles of the catalog board named by ``--board`` (its selector's choice),
PPCG's default and a small tile, each at the selector's thread block, launched through
``build_launch(KernelConfig)``; correctness against the NumPy reference on the kernel's
description's small problem, then the median of ``--repeats`` timed launches (CUDA events)
on its ``check_problem``. Needs CuPy (extra ``cuda``). Prints one
line per configuration; ``--json`` also writes them to a file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any, Dict, List

import numpy as np

from governor.kernels import (
    KERNELS,
    KernelConfig,
    build_launch,
    cupy_run,
    select_kernel_tiles,
)

#: per kernel: the selector's tiles (None), PPCG's default, the description's small tile
CONFIGS = {
    name: [None, {loop: 32 for loop in k.loops}, dict(k.small_tiles)] for name, k in KERNELS.items()
}


def _time_ms(cp: Any, fn: Any, repeats: int) -> float:
    fn()  # compile and warm up
    times = []
    for _ in range(repeats):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def check(
    cp: Any, kernel: str, tiles: Dict[str, int], repeats: int, fraction: float = 0.0
) -> Dict[str, Any]:
    """One configuration, launched as an app launches a per-clock answer:
    ``build_launch(KernelConfig)`` (precision, carveout and all)."""
    plan = cupy_run.device_plan(kernel, tiles, shared_fraction=fraction, cupy=cp)
    launch = build_launch(KernelConfig.from_plan(plan), cupy=cp)
    description = launch.description
    rng = np.random.default_rng(0)
    small = description.problem(rng, plan.tiles, np.float64)
    out = launch(*(cp.asarray(a) for a in small.arrays), **small.params)
    want = description.expected(small)
    error = float(np.abs(cp.asnumpy(out) - want).max() / (np.abs(want).max() or 1.0))
    big = description.check_problem(rng, np.float64)
    on_device = [cp.asarray(a) for a in big.arrays]
    ms = _time_ms(cp, lambda: launch(*on_device, **big.params), repeats)
    return {
        "kernel": kernel,
        "tile": plan.tiles,
        "thread_block": list(plan.thread_block),
        "carveout_percent": plan.carveout_percent,
        "max_rel_error": error,
        "correct": error <= description.tolerance,
        "median_ms": ms,
        "points_per_s": big.points / (ms * 1e-3),
    }


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="h100-sxm", help="whose selector gives the tiles")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", dest="json_file")
    args = parser.parse_args(argv)
    try:
        import cupy as cp  # type: ignore[import-not-found]

        print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    except Exception as err:
        print(f"gpu_check_kernels: no CuPy or no CUDA device: {err}", file=sys.stderr)
        return 1
    rows: List[Dict[str, Any]] = []
    for kernel, configs in CONFIGS.items():
        for tiles in configs:
            sel = select_kernel_tiles(kernel, args.board)
            chosen = tiles or sel.tiles
            fraction = sel.shared_fraction if tiles is None else 0.0
            row = check(cp, kernel, chosen, args.repeats, fraction)
            rows.append(row)
            tile = "x".join(str(v) for v in row["tile"].values())
            block = "x".join(str(d) for d in row["thread_block"])
            print(
                f"{kernel:<10} tile {tile:<10} block {block:<9} "
                f"{'ok ' if row['correct'] else 'BAD'} err {row['max_rel_error']:.1e} "
                f"{row['median_ms']:8.3f} ms  {row['points_per_s']:.3g} points/s"
            )
    if args.json_file:
        with open(args.json_file, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
