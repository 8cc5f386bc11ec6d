"""On a CUDA GPU: every library kernel against NumPy, then timed, at several configurations.

    python scripts/gpu_check_kernels.py [--repeats N] [--json FILE]

For each kernel: the tiles of the catalog board named by ``--board`` (its selector's choice),
PPCG's default and a small tile, each at the selector's thread block; correctness against the
NumPy reference of ``tests/kernels/test_gpu.py``'s sizes, then the median of ``--repeats``
timed launches (CUDA events) on a larger problem. Needs CuPy (extra ``cuda``). Prints one
line per configuration; ``--json`` also writes them to a file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any, Dict, List

import numpy as np

from governor.kernels import cupy_run, reference, select_kernel_tiles

CONFIGS = {
    "gemm": [None, {"i": 32, "j": 32, "k": 32}, {"i": 8, "j": 64, "k": 8}],
    "jacobi-2d": [None, {"i": 32, "j": 32}, {"i": 4, "j": 64}],
    "heat-3d": [None, {"i": 32, "j": 32, "k": 32}, {"i": 4, "j": 8, "k": 32}],
    "seidel-2d": [None, {"i": 32, "j": 32}, {"i": 8, "j": 8}],
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


def check(cp: Any, kernel: str, tiles: Dict[str, int], repeats: int) -> Dict[str, Any]:
    plan = cupy_run.device_plan(kernel, tiles)
    rng = np.random.default_rng(0)
    if kernel == "gemm":
        m, n, k = 203, 517, 131
        a, b, c = (rng.standard_normal(s) for s in ((m, k), (k, n), (m, n)))
        out = cupy_run.run_gemm(plan, cp.asarray(a), cp.asarray(b), cp.asarray(c), 1.5, 0.5)
        error = float(np.abs(cp.asnumpy(out) - (1.5 * a @ b + 0.5 * c)).max())
        size = 2048
        ga, gb, gc = (cp.asarray(rng.standard_normal((size, size))) for _ in range(3))
        ms = _time_ms(cp, lambda: cupy_run.run_gemm(plan, ga, gb, gc, 1.0, 0.0), repeats)
        work = 2.0 * size**3
    else:
        if kernel == "jacobi-2d":
            a = rng.standard_normal((301, 301))
            out = cupy_run.run_jacobi_2d(plan, cp.asarray(a), 5)
            error = float(np.abs(cp.asnumpy(out) - reference.jacobi_2d_ref(a, 5)).max())
            g = cp.asarray(rng.standard_normal((4096, 4096)))
            ms = _time_ms(cp, lambda: cupy_run.run_jacobi_2d(plan, g, 1), repeats)
            work = 4094.0**2
        elif kernel == "heat-3d":
            a = rng.standard_normal((61, 61, 61))
            out = cupy_run.run_heat_3d(plan, cp.asarray(a), 4)
            error = float(np.abs(cp.asnumpy(out) - reference.heat_3d_ref(a, 4)).max())
            g = cp.asarray(rng.standard_normal((256, 256, 256)))
            ms = _time_ms(cp, lambda: cupy_run.run_heat_3d(plan, g, 1), repeats)
            work = 254.0**3
        else:
            a = rng.standard_normal((45, 45))
            out = cupy_run.run_seidel_2d(plan, cp.asarray(a), 2)
            error = float(np.abs(cp.asnumpy(out) - reference.seidel_2d_ref(a, 2)).max())
            g = cp.asarray(rng.standard_normal((2048, 2048)))
            ms = _time_ms(cp, lambda: cupy_run.run_seidel_2d(plan, g, 1), repeats)
            work = 2046.0**2
    return {
        "kernel": kernel,
        "tile": plan.tiles,
        "thread_block": list(plan.thread_block),
        "max_abs_error": error,
        "correct": error < 1e-9,
        "median_ms": ms,
        "points_or_flops_per_s": work / (ms * 1e-3),
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
            chosen = tiles or select_kernel_tiles(kernel, args.board).tiles
            row = check(cp, kernel, chosen, args.repeats)
            rows.append(row)
            tile = "x".join(str(v) for v in row["tile"].values())
            block = "x".join(str(d) for d in row["thread_block"])
            print(
                f"{kernel:<10} tile {tile:<10} block {block:<9} "
                f"{'ok ' if row['correct'] else 'BAD'} err {row['max_abs_error']:.1e} "
                f"{row['median_ms']:8.3f} ms  {row['points_or_flops_per_s']:.3g}/s"
            )
    if args.json_file:
        with open(args.json_file, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
