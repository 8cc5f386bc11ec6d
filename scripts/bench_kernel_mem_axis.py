"""Where the memory clock moves a kernel's best configuration, and what ignoring it costs.

For every simulated board with several memory clocks and every library kernel (double
precision), ``best_table`` fills the least-energy configuration at each (core, memory) pair
(:mod:`governor.kernels.operating_points`). A table without the memory axis hands out, at
every memory clock, its configuration for the default memory clock; this prints at how many
pairs the two differ and the energy per run the axis saves there (the model's figures,
``run_cost`` at the pair), plus the lookup's cost with and without the axis.

    python scripts/bench_kernel_mem_axis.py [--boards nano,agx-orin] [--markdown]

Needs NVRTC (extra nvrtc) to compile the candidates.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from governor.devices.sim.catalog import board_names, get_board  # noqa: E402
from governor.kernels.operating_points import best_table, candidates, run_cost  # noqa: E402
from governor.kernels.templates import KERNELS  # noqa: E402


def _cost(spec, cands, config, clock_mhz, mem_clock_mhz) -> float:
    """Energy per run (J) of ``config`` at the pair."""
    found = next(x for x in cands if x.config == config)
    return run_cost(spec, found, clock_mhz, mem_clock_mhz)[1]


def rows(boards):
    for board in boards:
        spec = get_board(board)
        for kernel in sorted(KERNELS):
            table = best_table(kernel, board)
            cands = candidates(kernel, board)
            pairs = [(c, m) for m in table.mem_clocks_mhz for c in table.clocks_mhz]
            moved = [(c, m) for c, m in pairs if table.at(c, m) != table.at(c)]
            saved = []
            for c, m in moved:
                e_axis = _cost(spec, cands, table.at(c, m), c, m)
                e_plain = _cost(spec, cands, table.at(c), c, m)
                saved.append((1.0 - e_axis / e_plain) * 100.0)
            lowest = min(table.mem_clocks_mhz)
            yield {
                "board": board,
                "kernel": kernel,
                "pairs": len(pairs),
                "moved": len(moved),
                "at_lowest_mem": sum(1 for _, m in moved if m == lowest),
                "max_saved_pct": max(saved, default=0.0),
                "mean_saved_pct": sum(saved) / len(saved) if saved else 0.0,
                "ppw_pair": table.ppw_pair_mhz(),
            }


def lookup_us(board: str, kernel: str) -> tuple:
    table = best_table(kernel, board)
    plain = best_table(kernel, board, mem_clocks_mhz=[get_board(board).default_mem_clock_mhz])
    c = table.clocks_mhz[len(table.clocks_mhz) // 2]
    m = table.mem_clocks_mhz[0]
    n = 200_000

    def per_call(fn) -> float:
        return min(timeit.repeat(fn, number=n, repeat=3)) / n * 1e6

    return (
        per_call(lambda: plain.at(c)),
        per_call(lambda: table.at(c, m)),
        per_call(lambda: table.at(c + 1.0, m + 1.0)),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--boards",
        default="",
        help="comma-separated (default: every board with several memory clocks)",
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    boards = [b for b in args.boards.split(",") if b] or [
        b for b in board_names() if len(get_board(b).mem_clocks_mhz) > 1
    ]
    head = (
        "board",
        "kernel",
        "pairs",
        "moved",
        "at lowest mem",
        "max saved %",
        "mean saved %",
        "PPW pair (core, mem)",
    )
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print("  ".join(f"{h:>12}" for h in head))
    for r in rows(boards):
        pair = "-" if r["ppw_pair"] is None else f"{r['ppw_pair'][0]:g}, {r['ppw_pair'][1]:g}"
        cells = (
            r["board"],
            r["kernel"],
            str(r["pairs"]),
            str(r["moved"]),
            str(r["at_lowest_mem"]),
            f"{r['max_saved_pct']:.2f}",
            f"{r['mean_saved_pct']:.2f}",
            pair,
        )
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print("  ".join(f"{c:>12}" for c in cells))
    plain, hit, miss = lookup_us(boards[0], "jacobi-2d")
    print(
        f"\nlookup on {boards[0]} (jacobi-2d): at(clock) without the axis {plain:.2f} us, "
        f"at(clock, mem) on a table pair {hit:.2f} us, between pairs {miss:.2f} us"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
