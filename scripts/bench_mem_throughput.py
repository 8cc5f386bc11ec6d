"""The throughput policy with two knobs (core and memory clock) against the core-only policy
(the memory clock pinned at its default, as ``--mem-clock`` pins it) at the same frame rate,
per simulated board with a memory axis, on compute-bound and memory-bound frames.

    python scripts/bench_mem_throughput.py [--boards agx-orin,nano] [--duration-s 120]
                                           [--seeds 0,1] [--rate-hz 30] [--load 0.45]
                                           [--no-profile]

Each board is calibrated first with ``governor calibrate --device sim:NAME`` (a profile in a
temporary data directory, with its (core, memory) pair: the memory clock the knob tries;
``--no-profile`` runs without one, the knob then tries the next memory clock down). A run is
``governor simulate``'s perception trace (a camera frame every ``1/rate`` s needing ``load``
of its period at the top clock and default memory clock, ±5 % jitter; the app ticks each
frame with its busy time) with the frames running the board's ``compute`` or ``memory``
load (``simulate.FRAME_WORKLOAD``). Energy is the board's input (``board_energy_j``: it
sees the memory's power); ``late`` is the share of frames that missed their deadline, in
% of frames, two-knob / core-only; ``mem MHz`` the two-knob run's mean memory clock.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

LOADS = ("compute", "memory")


def one_run(name, doc, load, args, seed):
    """(two-knob result, core-only result) of ``simulate`` for frames of ``load``."""
    import governor.runtime.simulate as sim
    from governor.devices.sim.catalog import get_board

    default = get_board(name).default_mem_clock_mhz
    spec = {"policy": "throughput", "rate_hz": args.rate_hz}
    saved = sim.FRAME_WORKLOAD, sim.FRAME_LOAD, sim.FRAME_RATE_HZ
    sim.FRAME_WORKLOAD, sim.FRAME_LOAD, sim.FRAME_RATE_HZ = load, args.load, args.rate_hz
    try:
        runs = [
            sim.simulate(
                name,
                spec,
                "perception-30hz",
                args.duration_s,
                seed=seed,
                profile=doc,
                scope="board",
                mem_clock_mhz=pin,
            )
            for pin in (None, default)
        ]
    finally:
        sim.FRAME_WORKLOAD, sim.FRAME_LOAD, sim.FRAME_RATE_HZ = saved
    return runs[0], runs[1]


def _args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    parser.add_argument("--duration-s", type=float, default=120.0)
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (default: 0)")
    parser.add_argument("--rate-hz", type=float, default=30.0)
    parser.add_argument("--load", type=float, default=0.45, help="of a frame period, top clock")
    parser.add_argument("--no-profile", action="store_true", help="run without a profile")
    args = parser.parse_args()
    if not args.duration_s >= 10:
        sys.exit("bench_mem_throughput: --duration-s must be at least 10")
    if not 1.0 <= args.rate_hz <= 240.0:
        sys.exit("bench_mem_throughput: --rate-hz must be between 1 and 240")
    if not 0.05 <= args.load <= 0.9:
        sys.exit("bench_mem_throughput: --load must be between 0.05 and 0.9")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        sys.exit(f"bench_mem_throughput: --seeds must be integers, not {args.seeds!r}")
    if not args.seeds:
        sys.exit("bench_mem_throughput: --seeds names no seed")
    return args


def main() -> int:
    args = _args()
    names = [n for n in args.boards.split(",") if n]
    from _membench import calibrated, memory_boards, profile_pair, temp_dirs

    from governor.errors import GovernorError

    totals = {load: [0.0, 0.0, 0, 0, 0] for load in LOADS}  # energy two/one, late two/one, n
    worst = {load: 0.0 for load in LOADS}  # the largest late-share excess, % of frames
    ratios = {load: [] for load in LOADS}  # energy two-knob / core-only, per run
    with temp_dirs() as data_dir:
        _, boards = memory_boards(names, "bench_mem_throughput")
        print(
            "| board | frames | seed | pair memory MHz | two-knob J | core-only J | ratio "
            "| late % (two / one) | mem MHz |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for name in boards:
            doc = None if args.no_profile else calibrated(name, data_dir, "bench_mem_throughput")
            pair = profile_pair(doc) if doc else None
            for load in LOADS:
                for seed in args.seeds:
                    try:
                        two, one = one_run(name, doc, load, args, seed)
                    except GovernorError as err:
                        sys.exit(f"bench_mem_throughput: {name}: {err}")
                    e2, e1 = two["board_energy_j"], one["board_energy_j"]
                    n = two["frames"]
                    l2, l1 = two["deadline_misses"], one["deadline_misses"]
                    t = totals[load]
                    t[0] += e2
                    t[1] += e1
                    t[2] += l2
                    t[3] += l1
                    t[4] += n
                    worst[load] = max(worst[load], 100.0 * (l2 - l1) / n)
                    ratios[load].append(e2 / e1)
                    mem = two.get("mean_mem_clock_mhz")
                    print(
                        f"| {name} | {load} | {seed} | {'-' if not pair else f'{pair[1]:g}'} | "
                        f"{e2:.1f} | {e1:.1f} | {e2 / e1:.4f} | "
                        f"{100.0 * l2 / n:.2f} / {100.0 * l1 / n:.2f} | "
                        f"{'-' if mem is None else f'{mem:.0f}'} |",
                        flush=True,
                    )
    print()
    for load in LOADS:
        e2, e1, l2, l1, n = totals[load]
        r = ratios[load]
        print(
            f"{load}-bound frames: energy two-knob / core-only per run: least {min(r):.4f}, "
            f"mean {sum(r) / len(r):.4f}, most {max(r):.4f}; late {100.0 * l2 / n:.3f} % vs "
            f"{100.0 * l1 / n:.3f} % of frames, the largest excess on one run "
            f"{worst[load]:+.3f} % of frames"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
