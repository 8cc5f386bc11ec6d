"""PPW on the (core, memory) pair: the energy per unit of work of what ``governor run --policy
ppw`` holds, against the best fixed (core, memory) pair found by brute force.

    python scripts/bench_ppw_pairs.py [--boards agx-orin,nano]

For each simulated board with several memory clocks: ``governor calibrate --device sim:NAME``
(a profile in a temporary data directory, with its pair), then the decisions ``governor run
--policy ppw`` takes on that board: the memory clock the run sets (the profile's pair,
``ppw_pair_for``) and the core clock the PPW controller holds at it (made by the policy
table's factory, ``Governor(dev, "ppw")``), and the same with ``--mem-clock`` at the default
memory clock (the core-only baseline). Each is scored by the board's true steady-state energy
per unit (board-input power x time per unit of the builtin load, from the simulator's
physics) against the least over every (core, memory) pair of the tables.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def _true_energy(board, workload, clock, mem):
    gpu = board.steady_gpu_power_w(clock, workload, mem)
    return board.board_power_w(gpu) * workload.time_per_unit_s(clock, mem)


def _held(name, mem_mhz):
    """(memory clock, core clock) that governor run --policy ppw holds on sim:NAME, with the
    memory clock pinned at ``mem_mhz`` (None: the run sets the profile's pair)."""
    import governor
    from governor.runtime import Governor
    from governor.runtime.model import model_for_device, ppw_pair_for

    with governor.open_device(f"sim:{name}") as dev:
        if mem_mhz is None:
            model = model_for_device(dev, None, None).model
            pair, note = ppw_pair_for(dev, model)
            assert pair is not None, note
            mem_mhz = pair[1]
        dev.lock_mem_clock(mem_mhz)
        gov = Governor(dev, {"policy": "ppw"}, background=False, handle_signals=False)
        return mem_mhz, gov.controller.initial_mhz()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    args = parser.parse_args()
    names = [n for n in args.boards.split(",") if n]
    from _membench import calibrated, memory_boards, temp_dirs

    with temp_dirs() as data_dir:
        catalog, boards = memory_boards(names, "bench_ppw_pairs")
        rows = []
        for name in boards:
            board = catalog[name]
            calibrated(name, data_dir, "bench_ppw_pairs")  # the run reads the profile's pair
            workload = board.workloads["compute"]
            mem, core = _held(name, None)
            base_mem, base_core = _held(name, board.default_mem_clock_mhz)
            import governor

            with governor.open_device(f"sim:{name}") as dev:
                clocks = dev.supported_clocks_mhz()
            grid = {
                (f, m): _true_energy(board, workload, f, m)
                for f in clocks
                for m in board.mem_clocks_mhz
            }
            (bf, bm), best = min(grid.items(), key=lambda kv: kv[1])
            held = _true_energy(board, workload, core, mem)
            base = _true_energy(board, workload, base_core, base_mem)
            rows.append((name, f"{core:g}/{mem:g}", f"{bf:g}/{bm:g}", held, best, base))
            print(f"  {name}: ppw {core:g}/{mem:g}, best {bf:g}/{bm:g}", file=sys.stderr)
    print(
        "| board | ppw holds core/mem MHz | best fixed pair | energy above best | core-only above best |"
    )
    print("|---|---|---|---:|---:|")
    for name, held_pair, best_pair, held, best, base in rows:
        print(
            f"| {name} | {held_pair} | {best_pair} | {100 * (held / best - 1):.2f} % "
            f"| {100 * (base / best - 1):.2f} % |"
        )
    worst = max(100 * (r[3] / r[4] - 1) for r in rows)
    print(f"\nworst {worst:.2f} % above the best fixed pair (target: within 1 %)")
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
