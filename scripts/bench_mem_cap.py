"""The power-cap policy with two knobs (core and memory clock) against the core-only policy
(the memory clock pinned at its default, as ``--mem-clock`` pins it) under the same cap, per
simulated board with a memory axis and per trace.

    python scripts/bench_mem_cap.py [--boards agx-orin,nano] [--duration-s 60]
                                    [--missions M;M] [--cap-share 0.8] [--seed 0]

Each board is calibrated first with ``governor calibrate --device sim:NAME`` (a profile in a
temporary data directory, with its (core, memory) pair). A trace is one of ``governor
simulate``'s: ``steady`` (compute-bound), ``memory`` (memory-bound), ``memory-compute`` and
``step`` (mixed). The cap is ``--cap-share`` of the power figure the policy governs (the
device's ``power_w``) at the top core clock and the default memory clock on that trace
(``governor simulate --policy max``), the same for both runs. ``pinned-pair`` is the work
with the memory clock pinned at the pair's for the whole run (what a compute-bound phase can
gain at most; on a memory-bound phase far less than core-only). ``above cap`` is
``simulate``'s ``time_above_cap_s`` (periods whose 1 s mean exceeds the cap), two-knob /
core-only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

TRACES = ("steady", "memory", "memory-compute", "step")
KIND = {"steady": "compute", "memory": "memory", "memory-compute": "mixed", "step": "mixed"}


def one_mission(name, doc, trace, duration_s, share, seed):
    """(two-knob, core-only, pinned-pair work, seconds above the cap two-knob and core-only,
    cap W, the pair's memory clock)."""
    from governor.devices.sim.catalog import get_board
    from governor.runtime.simulate import simulate

    board = get_board(name)
    top = simulate(name, {"policy": "max"}, trace, duration_s, profile=doc, seed=seed)
    spec = {"policy": "power-cap", "cap_w": share * top["mean_power_w"]}
    from _membench import profile_pair

    pair = profile_pair(doc)
    pair_mem = pair[1] if pair is not None else None
    runs = [
        simulate(name, spec, trace, duration_s, profile=doc, seed=seed, mem_clock_mhz=mem)
        for mem in (None, board.default_mem_clock_mhz, pair_mem)
    ]
    two, one, low = runs
    return (
        two["work_done"],
        one["work_done"],
        low["work_done"],
        two["time_above_cap_s"],
        one["time_above_cap_s"],
        spec["cap_w"],
        pair_mem,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    parser.add_argument("--missions", default="", help="';'-separated traces (default: all)")
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--cap-share", type=float, default=0.8)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not args.duration_s >= 10:
        sys.exit("bench_mem_cap: --duration-s must be at least 10")
    if not 0.1 <= args.cap_share <= 1.0:
        sys.exit("bench_mem_cap: --cap-share must be between 0.1 and 1")
    names = [n for n in args.boards.split(",") if n]
    missions = [m for m in args.missions.split(";") if m] or list(TRACES)
    from _membench import calibrated, memory_boards, temp_dirs

    from governor.errors import GovernorError

    with temp_dirs() as data_dir:
        _, boards = memory_boards(names, "bench_mem_cap")
        print(
            "| board | trace | kind | pair memory MHz | cap W | two-knob work | core-only work "
            "| ratio | pinned-pair / core-only | above cap s (two / one) |"
        )
        print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
        ratios = {}
        above = [0.0, 0.0]
        for name in boards:
            doc = calibrated(name, data_dir, "bench_mem_cap")
            for trace in missions:
                try:
                    two, one, low, over, over1, cap, mem = one_mission(
                        name, doc, trace, args.duration_s, args.cap_share, args.seed
                    )
                except GovernorError as err:
                    sys.exit(f"bench_mem_cap: {trace}: {err}")
                label = KIND.get(trace, "other")
                ratio = two / one if one else float("nan")
                ratios.setdefault(label, []).append(ratio)
                above[0] += over
                above[1] += over1
                print(
                    f"| {name} | {trace} | {label} | {'-' if mem is None else f'{mem:g}'} | "
                    f"{cap:.2f} | {two:.1f} | {one:.1f} | {ratio:.3f} | "
                    f"{low / one if one else float('nan'):.3f} | {over:.1f} / {over1:.1f} |",
                    flush=True,
                )
    print()
    for label, values in sorted(ratios.items()):
        print(f"{label}: least {min(values):.3f}, mean {sum(values) / len(values):.3f}")
    print(f"time above the cap, all runs: two-knob {above[0]:.1f} s, core-only {above[1]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
