#!/usr/bin/env python3
"""Bench the exact EATSS solver: solve time per case, exactness, and Z3 side by side.

For a100, xavier and 2080ti in double precision under both bounds, every case of
``governor tiles --all`` (30 kernels x the GPU's shared fractions x warp fractions 1, 1/2, 1/4,
1/8) is solved; the answer is checked against an exhaustive vectorised enumeration (numpy), and
the median and largest solve times are printed. With z3-solver importable (``pip install
governor[bench]``) a sample of the cases is also handed to Z3 the way the published selector
does it: any model, then ``W > k * best`` with k = 2, 3/2, 4/3 (the next k after each
unsatisfiable check), stopping after the third failure.

    python scripts/bench_tiles.py            # solver + exactness
    python scripts/bench_tiles.py --z3 2     # and Z3 on every 2nd case (slow: ~1 s a case)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.tuning import eatss  # noqa: E402
from governor.tuning.eatss import Problem  # noqa: E402

GPUS = ("a100", "xavier", "2080ti")
BOUNDS = ("paper", "artifact")


def exhaustive(problem: Problem) -> int:
    """The maximum W by enumerating every tile combination (the last loop in closed form).

    Loops without weight outside the block are held at their smallest tile, which loses
    nothing (they change no objective and only use resources). Returns -1 if nothing fits.
    """
    n = len(problem.loops)
    par = set(problem.parallel)
    idle = {d for d in range(n) if d not in par and problem.weights[d] == 0}
    domains = [
        np.array([problem.lower[d]] if d in idle else list(problem.domain(d)), dtype=np.int64)
        for d in range(n)
    ]
    movable = [d for d in range(n) if len(domains[d]) > 1]
    if not movable:
        tiles = [int(x[0]) for x in domains]
        return problem.objective(tiles) if problem.is_feasible(tiles) else -1
    last = max(movable, key=lambda d: len(domains[d]))
    outer = [d for d in range(n) if d != last]
    chunk = max(outer, key=lambda d: len(domains[d])) if outer else None
    best = -1
    for v in domains[chunk] if chunk is not None else [None]:
        axes = [np.array([v]) if d == chunk else domains[d] for d in outer]
        grids = np.meshgrid(*axes, indexing="ij") if axes else []
        t = {d: g.ravel() for d, g in zip(outer, grids)}
        size = len(next(iter(t.values()))) if t else 1
        ok = np.ones(size, dtype=bool)
        top = np.full(size, problem.upper[last], dtype=np.int64)
        for c in problem.constraints:
            const = np.zeros(size, dtype=np.int64)
            lin = np.zeros(size, dtype=np.int64)
            for coef, loops in c.monomials:
                term = np.full(size, coef, dtype=np.int64)
                for e in loops:
                    if e != last:
                        term = term * t[e]
                if last in loops:
                    lin += term
                else:
                    const += term
            room = c.capacity - const
            ok &= room >= 0
            with np.errstate(divide="ignore"):
                lim = np.where(lin > 0, room // np.maximum(lin, 1), top)
            top = np.minimum(top, lim)
        st = problem.step[last]
        top = top // st * st
        ok &= top >= problem.lower[last]
        t[last] = top
        b = np.ones(size, dtype=np.int64)
        for d in problem.parallel:
            b = b * t[d]
        w = b + sum(problem.weights[d] * t[d] for d in range(n))
        for d in range(n):
            ok &= w >= t[d]
        if ok.any():
            best = max(best, int(w[ok].max()))
    return best


def z3_select(problem: Problem, timeout_ms: int = 1000) -> Tuple[int, float]:
    """Z3 on the same formulation, stopping as the published selector does. (W, seconds)."""
    import z3

    start = time.perf_counter()
    n = len(problem.loops)
    mult = [z3.Int(f"m_{name}") for name in problem.loops]
    opt = z3.Solver()
    opt.set("timeout", timeout_ms)
    tiles = []
    for d in range(n):
        if problem.step[d] == 0:
            tiles.append(z3.IntVal(problem.lower[d]))
        else:
            st = problem.step[d]
            opt.add(mult[d] >= problem.lower[d] // st, mult[d] <= problem.upper[d] // st)
            tiles.append(mult[d] * st)
    for c in problem.constraints:
        terms = []
        for coef, loops in c.monomials:
            term = z3.IntVal(coef)
            for e in loops:
                term = term * tiles[e]
            terms.append(term)
        opt.add(z3.Sum(terms) <= c.capacity)
    block = z3.IntVal(1)
    for d in problem.parallel:
        block = block * tiles[d]
    w_expr = block + z3.Sum([problem.weights[d] * tiles[d] for d in range(n)] + [z3.IntVal(0)])
    for d in range(n):
        opt.add(w_expr >= tiles[d])
    if opt.check() != z3.sat:
        return -1, time.perf_counter() - start
    best = opt.model().eval(w_expr).as_long()
    # the published selector's rule: W > k·best with k = 2, then 3/2, then 4/3 after each
    # unsatisfiable check (k stays while checks succeed); three failures end the search
    factors, failures = ((2, 1), (3, 2), (4, 3)), 0  # k as num/den: exact integer comparison
    while failures < len(factors):
        opt.push()
        num, den = factors[failures]
        opt.add(w_expr * den > best * num)
        if opt.check() == z3.sat:
            best = opt.model().eval(w_expr).as_long()
            opt.pop()
            continue
        opt.pop()
        failures += 1
    return best, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="double", choices=("single", "double"))
    parser.add_argument("--z3", type=int, default=0, metavar="N", help="Z3 on every Nth case")
    parser.add_argument("--no-check", action="store_true", help="skip the exhaustive check")
    args = parser.parse_args()
    try:
        import z3  # noqa: F401

        have_z3 = True
    except ImportError:
        have_z3 = False
    if args.z3 and not have_z3:
        print("z3-solver is not importable: pip install governor[bench]; Z3 columns skipped")

    print(f"EATSS exact solver, {args.precision} precision, every --all case")
    header = (
        "| gpu | bound | cases | feasible | median ms | max ms | exact | z3 cases | "
        "z3 median s | speed-up (median) | z3 below optimum | z3 worst % of optimum |"
    )
    print(header)
    print("|" + "---|" * 12)
    for gpu in GPUS:
        for bound in BOUNDS:
            results = eatss.select_all(gpu, args.precision, bound)
            # Re-time each case alone for a clean figure (the first pass warms caches).
            times: List[float] = []
            exact = 0
            feasible = 0
            z3_times: List[float] = []
            speedups: List[float] = []
            z3_below = 0
            z3_worst: Optional[float] = None
            g = eatss.find_gpu(gpu)
            for i, r in enumerate(results):
                again = eatss.select_tiles(
                    r.kernel, g, r.shared_fraction, r.warp_fraction, args.precision, bound
                )
                times.append(again.solve_ms)
                problem = eatss.build_problem(
                    eatss.find_kernel(r.kernel),
                    g,
                    r.shared_fraction,
                    r.warp_fraction,
                    args.precision,
                    bound,
                )
                if r.feasible:
                    feasible += 1
                if not args.no_check:
                    truth = exhaustive(problem) if isinstance(problem, Problem) else -1
                    if truth == (r.objective if r.feasible else -1):
                        exact += 1
                    else:
                        print(
                            f"  MISMATCH {r.kernel} s={r.shared_fraction} w={r.warp_fraction}: "
                            f"solver {r.objective}, exhaustive {truth}"
                        )
                if args.z3 and have_z3 and r.feasible and i % args.z3 == 0:
                    w_z3, secs = z3_select(problem)
                    z3_times.append(secs)
                    speedups.append(secs * 1000.0 / max(again.solve_ms, 1e-3))
                    if w_z3 < r.objective:
                        z3_below += 1
                    share = 100.0 * w_z3 / r.objective
                    z3_worst = share if z3_worst is None else min(z3_worst, share)
            check = "-" if args.no_check else f"{exact}/{len(results)}"
            z3_cols = (
                f"{len(z3_times)} | {statistics.median(z3_times):.2f} | "
                f"{statistics.median(speedups):.0f}x | {z3_below} | {z3_worst:.0f} %"
                if z3_times
                else "- | - | - | - | -"
            )
            print(
                f"| {gpu} | {bound} | {len(results)} | {feasible} | "
                f"{statistics.median(times):.2f} | {max(times):.2f} | {check} | {z3_cols} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
