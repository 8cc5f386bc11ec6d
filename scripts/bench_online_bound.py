"""How much work a battery policy that cannot see the future can do on the step trace, when
it must also do at least the best constant clock's work on the traces it cannot tell from
the step trace at first (issue 15 asks both: "on every trace at least as much work as the
best constant clock in hindsight", and 1.03 times it on average over the bench's traces).

    python scripts/bench_online_bound.py [--boards a,b] [--grid N] [--baseline-cache FILE]

The step trace runs the memory-bound load for a third of the mission, the compute-bound
load for the next third, and the memory-bound load again. Until a third has run, a policy
sees exactly what it would see on ``memory`` (memory-bound all along); until two thirds
have run, what it would see on ``memory-compute`` (memory-bound, then compute-bound to the
end). On the same battery it must therefore spend the same in the first third on all
three traces, and the same in the second on ``step`` and ``memory-compute``.

Under the simulator's physics in thermal steady state (the bench's oracle's: each load's
upper concave envelope of work rate against board power over the clocks the firmware
does not throttle, ``bench_runtime._phase_points`` and ``_upper_hull``), a first third
spent at mean power ``p1`` and a second at ``p2`` do at most the envelope's work there,
and the rest of each trace at most what hindsight does with the energy left. The bound is
the most work on ``step`` over ``(p1, p2)`` (a grid, refined around its best cell) such
that that most-work on ``memory`` (and on ``memory-compute``) still reaches its own best
constant clock's work on the same budget. Every causal policy that meets those two
constraints does at most that on ``step``; since the rest of each sibling is credited with
hindsight, the true limit is lower still.

Budgets follow the bench's rule (60 % of the way from the lowest clock's board energy to
the top clock's, per trace) under the same steady-state physics, or are the bench's own
(``--baseline-cache``, the file ``bench_runtime.py --baseline-cache`` keeps: its budgets
come from simulated missions, whose top clock the firmware throttles on the capped boards,
so they are higher there). The last line is the
bench's battery mean with the steady and bursty rows at their oracle (no causal policy
does better) and the step rows at the bound: the most a policy can average over the
bench's traces while keeping the promise on the step trace's siblings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_runtime import _phase_points, _upper_hull, battery_oracle  # noqa: E402

from governor.devices.sim.catalog import board_names, get_board  # noqa: E402
from governor.runtime.simulate import trace_segments  # noqa: E402

DURATION_S = 600.0
SHARE = 0.6  # the bench's budget: this far from the lowest clock's energy to the top's


def _rate(hull, power_w):
    """Work rate on the envelope at mean board power ``power_w`` (time-sharing the two
    vertices around it); None below the least power the load can draw, the top's above."""
    if power_w < hull[0][0] * (1 - 1e-12):
        return None
    if power_w >= hull[-1][0]:
        return hull[-1][1]
    for (p0, w0), (p1, w1) in zip(hull, hull[1:]):
        if power_w <= p1:
            return w0 + (w1 - w0) * (power_w - p0) / (p1 - p0)
    return hull[-1][1]


def _phases(trace, duration_s, seed=0):
    """[(load name or None, seconds)] of a trace, in order."""
    seg = trace_segments(trace, duration_s, seed)
    ends = [s for s, _ in seg[1:]] + [duration_s]
    return [(name, min(end, duration_s) - start) for (start, name), end in zip(seg, ends)]


def _constant_runs(spec, phases):
    """(board energy J, work units) of each table clock the firmware does not throttle on
    any phase, held constant through ``phases``, in steady state; rising with the clock."""
    mem = spec.default_mem_clock_mhz
    out = []
    for f in spec.clocks_mhz:
        energy_j = work = 0.0
        throttled = False
        for name, secs in phases:
            load = spec.workloads[name] if name else None
            gpu_w = spec.steady_gpu_power_w(f, load, mem)
            if load is not None and spec.limited_power_w(gpu_w) > spec.power_limit_w:
                throttled = True
            energy_j += secs * spec.board_power_w(gpu_w)
            work += secs / load.time_per_unit_s(f, mem) if load is not None else 0.0
        if not throttled:
            out.append((f, energy_j, work))
    return out


def budget_j(spec, trace, duration_s, seed=0):
    """The bench's budget rule under steady-state physics."""
    runs = _constant_runs(spec, _phases(trace, duration_s, seed))
    low, top = runs[0][1], runs[-1][1]
    return low + SHARE * (top - low)


def best_constant(spec, trace, duration_s, budget):
    """(clock MHz, work) of the best constant clock whose energy fits ``budget``."""
    fits = [(f, w) for f, e, w in _constant_runs(spec, _phases(trace, duration_s)) if e <= budget]
    return max(fits, key=lambda fw: fw[1]) if fits else (None, 0.0)


def step_bound(board, duration_s=DURATION_S, grid=240, budget=None):
    """For one board: the step trace's budget (``budget``, else the bench's rule in steady
    state), best constant work, oracle work, and the most work on it of a causal policy
    that reaches the best constant clock's work on ``memory`` (key ``memory``) and on
    ``memory`` and ``memory-compute`` (key ``both``)."""
    spec = get_board(board)
    third = duration_s / 3.0
    if budget is None:
        budget = budget_j(spec, "step", duration_s)
    mem = _upper_hull(_phase_points(spec, spec.workloads["memory"]))
    cmp_ = _upper_hull(_phase_points(spec, spec.workloads["compute"]))
    need_m = best_constant(spec, "memory", duration_s, budget)[1] * (1 - 1e-9)
    need_mc = best_constant(spec, "memory-compute", duration_s, budget)[1] * (1 - 1e-9)
    const_clock, const_work = best_constant(spec, "step", duration_s, budget)

    def works(p1, p2):
        """(step, memory, memory-compute) at most, for the first two thirds' mean powers."""
        w1 = third * _rate(mem, p1)
        left = budget - third * p1
        tail = _rate(mem, left / (2 * third))
        on_m = w1 + 2 * third * tail if tail is not None else -1.0
        w2 = third * _rate(cmp_, p2)
        left2 = left - third * p2
        last_m, last_c = _rate(mem, left2 / third), _rate(cmp_, left2 / third)
        on_s = w1 + w2 + third * last_m if last_m is not None else -1.0
        on_mc = w1 + w2 + third * last_c if last_c is not None else -1.0
        return on_s, on_m, on_mc

    def search(lo1, hi1, lo2, hi2, n):
        best = {"none": (-1.0, None), "memory": (-1.0, None), "both": (-1.0, None)}
        for i in range(n + 1):
            p1 = lo1 + (hi1 - lo1) * i / n
            for j in range(n + 1):
                p2 = lo2 + (hi2 - lo2) * j / n
                s, m, mc = works(p1, p2)
                for key, ok in (
                    ("none", True),
                    ("memory", m >= need_m),
                    ("both", m >= need_m and mc >= need_mc),
                ):
                    if ok and s > best[key][0]:
                        best[key] = (s, (p1, p2))
        return best

    lo1, hi1, lo2, hi2 = mem[0][0], mem[-1][0], cmp_[0][0], cmp_[-1][0]
    best = search(lo1, hi1, lo2, hi2, grid)
    for key in best:  # refine around each best cell
        if best[key][1] is None:
            continue
        p1, p2 = best[key][1]
        d1, d2 = (hi1 - lo1) / grid, (hi2 - lo2) / grid
        fine = search(
            max(lo1, p1 - d1), min(hi1, p1 + d1), max(lo2, p2 - d2), min(hi2, p2 + d2), 40
        )[key]
        if fine[0] > best[key][0]:
            best[key] = fine
    oracle_work, oracle_const = battery_oracle(board, "step", duration_s, budget)
    return {
        "budget_j": budget,
        "const_clock_mhz": const_clock,
        "const_work": const_work,
        "oracle": oracle_work / oracle_const,
        "grid_oracle": best["none"][0] / const_work,
        "memory": best["memory"][0] / const_work if best["memory"][1] else None,
        "both": best["both"][0] / const_work if best["both"][1] else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    parser.add_argument("--grid", type=int, default=240, help="grid cells per third's power")
    parser.add_argument("--seed", type=int, default=0, help="the bursty trace's seed")
    parser.add_argument(
        "--baseline-cache",
        default=None,
        metavar="FILE",
        help="take the budgets from the battery bench's baseline cache (bench_runtime.py "
        "--baseline-cache FILE, 600 s): the bench's own, measured on simulated "
        "missions (default: the bench's rule in steady state)",
    )
    args = parser.parse_args()
    boards = [b for b in args.boards.split(",") if b] or list(board_names())
    unknown = sorted(set(boards) - set(board_names()))
    if unknown:
        parser.error(f"unknown board {unknown[0]!r}; known: {', '.join(board_names())}")
    if args.grid < 2:
        parser.error(f"--grid must be 2 or more, not {args.grid}")
    cached = {}
    if args.baseline_cache:
        try:
            cached = json.loads(Path(args.baseline_cache).read_text()).get("battery", {})
        except (OSError, ValueError, AttributeError) as err:
            parser.error(f"--baseline-cache {args.baseline_cache}: not readable ({err})")

    def budget_of(spec, board, trace):
        seed = args.seed if trace == "bursty" else 0
        row = cached.get(f"{board}|{trace}|{seed}|board|{DURATION_S:g}")
        return row["budget_j"] if row else budget_j(spec, trace, DURATION_S, seed)

    print(
        "| board | step budget J | best constant MHz | oracle vs best constant | "
        "grid's hindsight (check) | causal, >= constant on memory | "
        "causal, >= constant on memory and memory-compute | that / oracle |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for board in boards:
        spec = get_board(board)
        r = step_bound(board, grid=args.grid, budget=budget_of(spec, board, "step"))
        both = r["both"] if r["both"] is not None else float("nan")
        mem_only = r["memory"] if r["memory"] is not None else float("nan")
        for trace in ("steady", "bursty"):
            b = budget_of(spec, board, trace)
            work, const = battery_oracle(board, trace, DURATION_S, b, args.seed)
            ratios.append(work / const)
        ratios.append(both)
        print(
            f"| {board} | {r['budget_j']:.0f} | {r['const_clock_mhz']:.0f} | {r['oracle']:.4f} | "
            f"{r['grid_oracle']:.4f} | {mem_only:.4f} | {both:.4f} | {both / r['oracle']:.4f} |"
        )
    print(
        f"bench battery mean with steady and bursty at their oracle and step at the causal "
        f"bound: {sum(ratios) / len(ratios):.4f} (the Done-when asks >= 1.03)"
    )


if __name__ == "__main__":
    main()
