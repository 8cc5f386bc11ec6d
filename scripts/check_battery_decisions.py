"""Digest of every clock the battery policy asks for, for a speed change's A/B.

    python scripts/check_battery_decisions.py [--boards a,b] [--duration-s 600]
    python scripts/check_battery_decisions.py --tree /path/to/other/checkout
    python scripts/check_battery_decisions.py --mem-clock default

``--mem-clock default`` pins the memory clock at each board's default (a lock, as ``governor
run --mem-clock`` takes), on the boards with a memory axis, so the battery policy governs
the core clock alone there too: the core-only decisions, comparable with a tree from before the
memory clock was governed (whose boards' memory clocks stay at the default).

A change meant only to make the control step cheaper must leave every decision as it was.
This runs battery missions on the simulated boards (steady, bursty and step traces; the job
reporting its work with ``gov.tick`` and not; board scope, a budget of 0.75 of what the top
clock uses) with the ``governor`` package of ``--tree`` (default: this checkout), records
every clock the governor asks the device for (``Governor._set_clock``), and prints per
mission a digest of those clocks and the work and board energy at full precision, then one
digest of all. Two trees that print the same last line made the same decisions bit for bit.
The profiles are calibrated by this checkout (the same for both trees of an A/B).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CHILD = r"""
import contextlib, hashlib, json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import logging
logging.getLogger("governor.runtime").addHandler(logging.NullHandler())
import governor.runtime.governor as G
from governor.runtime.simulate import simulate
from bench_runtime import _TickingApp
docs = json.load(open(sys.argv[3]))
duration = float(sys.argv[4])
pin = sys.argv[5] == "default"
from governor.devices.sim.catalog import get_board
asked = []
real = G.Governor._set_clock
def record(self, clock_mhz, *, urgent):
    asked.append(repr(clock_mhz))
    return real(self, clock_mhz, urgent=urgent)
G.Governor._set_clock = record
total = hashlib.sha256()
for board, doc in docs.items():
    for trace in ("steady", "bursty", "step"):
        for ticks in (True, False):
            with _TickingApp() if ticks else contextlib.nullcontext():
                top = simulate(board, {"policy": "max"}, trace, duration, profile=doc)
                spec = {"policy": "battery", "energy_j": 0.75 * top["board_energy_j"],
                        "duration_s": duration, "scope": "board"}
                asked.clear()
                spec_b = get_board(board)  # a board with one memory clock has nothing to pin
                axis = pin and len(spec_b.mem_clocks_mhz) > 1
                extra = {"mem_clock_mhz": spec_b.default_mem_clock_mhz} if axis else {}
                r = simulate(board, spec, trace, duration, profile=doc, **extra)
            clocks = hashlib.sha256("\n".join(asked).encode()).hexdigest()[:12]
            line = f"{board} {trace} {'ticks' if ticks else 'no-ticks'} {clocks} {len(asked)} {r['work_done']!r} {r['board_energy_j']!r}"
            total.update(line.encode())
            print(line, flush=True)
print("all missions", total.hexdigest())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    parser.add_argument("--duration-s", type=float, default=600.0)
    parser.add_argument(
        "--tree", type=Path, default=REPO, help="checkout whose governor package decides"
    )
    parser.add_argument(
        "--mem-clock",
        choices=("default",),
        default="",
        help="pin the memory clock at each board's default (the core-only decisions)",
    )
    args = parser.parse_args()
    if not (args.tree / "governor" / "__init__.py").is_file():
        sys.exit(f"check_battery_decisions: {args.tree} holds no governor package")
    if not args.duration_s >= 10.0:
        sys.exit("check_battery_decisions: --duration-s must be at least 10")
    from decision_harness import run_missions

    run_missions(
        "check_battery_decisions",
        args.tree,
        args.boards,
        lambda profiles: (
            [CHILD, str(args.tree), str(REPO / "scripts"), profiles]
            + [repr(args.duration_s), args.mem_clock]
        ),
    )


if __name__ == "__main__":
    main()
