"""Clock and kernel configuration chosen together, against either alone, on simulated boards.

    python scripts/bench_joint.py [--boards a,b] [--kernels gemm,jacobi-2d] [--cap-fraction F]
                                  [--markdown]

For each board and library kernel, the candidate configurations of
:mod:`governor.kernels.operating_points` (tiles x thread blocks, registers and shared memory
from NVRTC) are costed at every clock of the board with the block-size model and the board's
power physics (the simulated board's own truth). Work per joule is runs per joule of one
modelled run (the ratios matter, not the unit); runs per second is printed as c/a too, since
a power cap trades joules for speed. Three choices:

(a) clock policy, configuration chosen for the top clock (what a cached, single answer gives);
(b) configuration only: the board's default (top) clock, the best configuration there;
(c) joint: the configuration the table gives at the clock the policy picks.

Power cap: the cap is ``--cap-fraction`` (0.7) of the power at the top clock with the top
clock's configuration; the policy runs the highest clock whose steady power fits the cap, for
(a) with the fixed configuration, for (c) with the configuration of each clock. (b) ignores the
cap (it does not govern the clock): the table marks it when it is over. Battery budget: the
policy runs the clock with the most work per joule (the budget then lasts longest); (a) finds
it with the fixed configuration, (c) over every (clock, configuration) pair. The operating
points are the steady states the policies converge to, computed from the model, not a run of
the control loop.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

from governor.devices.sim.catalog import board_names, get_board
from governor.kernels import KERNELS
from governor.kernels.operating_points import candidates, run_cost


def evaluate_board(board: str, kernel: str, cap_fraction: float) -> List[Dict[str, Any]]:
    spec = get_board(board)
    clocks = sorted(spec.clocks_mhz)
    cands = candidates(kernel, board)
    # cost[c][k] = (time_s, energy_j) of candidate k at clock c
    cost = {f: [run_cost(spec, cand, f) for cand in cands] for f in clocks}

    def best_at(f: float) -> int:
        return min(range(len(cands)), key=lambda k: (cost[f][k][1], k))

    def power(f: float, k: int) -> float:
        t, e = cost[f][k]
        return e / t

    top = clocks[-1]
    k_top = best_at(top)
    rows = []
    # power cap
    cap_w = cap_fraction * power(top, k_top)
    fit_a = [f for f in clocks if power(f, k_top) <= cap_w] or clocks[:1]
    fit_c = [f for f in clocks if power(f, best_at(f)) <= cap_w] or clocks[:1]
    fa, fc = fit_a[-1], fit_c[-1]
    kc = best_at(fc)
    rows.append(
        _row(board, kernel, f"cap {cap_w:.1f} W", cost, cands, (fa, k_top), (top, k_top), (fc, kc))
    )
    rows[-1]["b_over_cap"] = power(top, k_top) > cap_w
    # battery budget: the most work per joule
    fa = min(clocks, key=lambda f: cost[f][k_top][1])
    fc, kc = min(((f, best_at(f)) for f in clocks), key=lambda p: cost[p[0]][p[1]][1])
    rows.append(_row(board, kernel, "battery", cost, cands, (fa, k_top), (top, k_top), (fc, kc)))
    rows[-1]["b_over_cap"] = False
    return rows


def _row(board, kernel, policy, cost, cands, a, b, c) -> Dict[str, Any]:
    def per_j(point):
        f, k = point
        return 1.0 / cost[f][k][1]

    def per_s(point):
        f, k = point
        return 1.0 / cost[f][k][0]

    def label(point):
        f, k = point
        cfg = cands[k].config
        tile = "x".join(str(v) for v in cfg.tile.values())
        return f"{f:g} MHz {tile}/{cfg.threads_per_block}t"

    return {
        "board": board,
        "kernel": kernel,
        "policy": policy,
        "a": per_j(a),
        "b": per_j(b),
        "c": per_j(c),
        "a_rate": per_s(a),
        "c_rate": per_s(c),
        "a_point": label(a),
        "b_point": label(b),
        "c_point": label(c),
        "config_moved": cands[a[1]].config != cands[c[1]].config,
    }


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default=",".join(board_names()))
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--cap-fraction", type=float, default=0.7)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    if not 0 < args.cap_fraction <= 1:
        print("bench_joint: --cap-fraction must be in (0, 1]", file=sys.stderr)
        return 2
    rows: List[Dict[str, Any]] = []
    for board in [b for b in args.boards.split(",") if b]:
        for kernel in [k for k in args.kernels.split(",") if k]:
            rows += evaluate_board(board, kernel, args.cap_fraction)
    if args.markdown:
        print(
            "| board | kernel | policy | (a) clock only | (b) config only | (c) joint | "
            "c/a | c/b | runs/s c/a | joint point |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        over = " (over cap)" if r["b_over_cap"] else ""
        cells = [
            r["board"],
            r["kernel"],
            r["policy"],
            f"{r['a']:.4g}",
            f"{r['b']:.4g}{over}",
            f"{r['c']:.4g}",
            f"{r['c'] / r['a']:.3f}",
            f"{r['c'] / r['b']:.3f}",
            f"{r['c_rate'] / r['a_rate']:.3f}",
            r["c_point"] + (" (moved)" if r["config_moved"] else ""),
        ]
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
