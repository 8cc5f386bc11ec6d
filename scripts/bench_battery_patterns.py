"""The battery policy on phase patterns the bench's traces do not hold (held out: no rule or
constant of the policy was tuned on them), each against its own best constant clock.

    python scripts/bench_battery_patterns.py [--boards a,b] [--patterns P;P] [--ticks yes|no|both]
                                             [--duration-s S] [--baseline-cache FILE]
                                             [--new-user]

A pattern is a phase-list trace (``governor simulate --trace load:weight,...``). The
budget follows the bench's rule for each pattern (60 % of the way from the lowest clock's
board energy to the top clock's), the best constant clock is the highest that lasts it
(brute-forced), and the policy runs on the board scope as ``bench_runtime.py`` runs it,
with the job ticking its work (``gov.tick``) or not. The default patterns pair with the
bench's traces: ``compute:1,memory:1`` looks like ``steady`` for its first half,
``memory:1,compute:5`` like ``step`` and ``memory-compute`` for its first sixth; the
others alternate the loads in phases of other lengths than the step trace's. The idle
patterns (``IDLE_PATTERNS``) are missions with waits (a robot at a dock, or waiting for a
goal): at the start, between loads, twice, long, and at the end. None was used to choose the
rule for waits (``idle:1,compute:2`` and ``compute:1,idle:1,compute:1`` were); a mission
that ends in a wait is one no policy that cannot see the future can spend well (the budget
it leaves for the wait is a share of the mission's it had no sign of), reported apart.
``--new-user`` runs the patterns as someone trying the policy first would: no profile, and
the budget of the fixed clock the uncalibrated model guesses, against that clock's work.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_runtime import BaselineCache, _TickingApp, battery_baselines  # noqa: E402

from governor.devices.sim.catalog import board_names  # noqa: E402
from governor.errors import InvalidRequestError  # noqa: E402
from governor.runtime.simulate import phase_list, simulate  # noqa: E402

PATTERNS = (
    "compute:1,memory:1",
    "memory:1,compute:5",
    "memory:1,compute:1,memory:1,compute:1",
    "compute:1,memory:1,compute:2",
)
IDLE_PATTERNS = (
    "idle:1,memory:2",
    "memory:1,idle:1,compute:2",
    "idle:1,compute:1,idle:1,memory:1",
    "idle:3,compute:1",
    "compute:2,idle:1",
)


def run(board, doc, pattern, duration_s, ticks, cache):
    """(policy work / best constant clock's work, board energy / budget) on one pattern."""
    key = cache.battery_key(board, pattern, 0, "board", duration_s)
    base = cache.battery_baseline(
        key, functools.partial(battery_baselines, board, doc, pattern, duration_s, "board")
    )
    spec = {
        "policy": "battery",
        "energy_j": base["budget_j"],
        "duration_s": duration_s,
        "scope": "board",
    }
    with _TickingApp() if ticks else contextlib.nullcontext():
        r = simulate(board, spec, pattern, duration_s, profile=doc)
    best = base["best_work"]
    ratio = r["work_done"] / best if best else float("nan")
    return ratio, r["board_energy_j"] / base["budget_j"]


def run_new_user(board, pattern, duration_s, ticks):
    """As a new user tries it: no profile, and the budget the whole-board energy of the
    clock the uncalibrated model guesses for PPW (its fixed-clock run is the comparison)."""
    guess = simulate(board, {"policy": "max"}, "steady", 1.0)["model"]["ppw_clock_mhz"]
    fixed = simulate(board, {"policy": "clock", "clock_mhz": guess}, pattern, duration_s)
    budget = fixed["board_energy_j"]
    spec = {"policy": "battery", "energy_j": budget, "duration_s": duration_s, "scope": "board"}
    with _TickingApp() if ticks else contextlib.nullcontext():
        r = simulate(board, spec, pattern, duration_s)
    return r["work_done"] / fixed["work_done"], r["board_energy_j"] / budget


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    parser.add_argument(
        "--patterns",
        default=";".join(PATTERNS + IDLE_PATTERNS),
        help="semicolon-separated phase lists (default: the held-out patterns, "
        "PATTERNS and IDLE_PATTERNS)",
    )
    parser.add_argument("--ticks", choices=("yes", "no", "both"), default="both")
    parser.add_argument("--duration-s", type=float, default=600.0, help="mission length")
    parser.add_argument(
        "--baseline-cache",
        metavar="FILE",
        default=None,
        help="keep the profiles and baselines in FILE (bench_runtime.py's format)",
    )
    parser.add_argument(
        "--new-user",
        action="store_true",
        help="no profile; budget: the whole-board energy of the clock the uncalibrated "
        "model guesses, which is the comparison",
    )
    args = parser.parse_args(argv)
    boards = [b for b in args.boards.split(",") if b] or list(board_names())
    unknown = [b for b in boards if b not in board_names()]
    if unknown:
        parser.error(f"unknown board {unknown[0]!r}; known: {', '.join(board_names())}")
    patterns = [p.strip() for p in args.patterns.split(";") if p.strip()]
    if not patterns:
        parser.error("--patterns: give at least one phase list")
    for p in patterns:
        try:
            phase_list(p)
        except InvalidRequestError as err:
            parser.error(f"--patterns: {err}")
    if not 10.0 <= args.duration_s <= 86400.0:
        parser.error(f"--duration-s must be within 10..86400, not {args.duration_s:g}")
    modes = {"yes": (True,), "no": (False,), "both": (True, False)}[args.ticks]
    cache = BaselineCache(args.baseline_cache)
    if args.new_user:
        print(
            f"## Battery on phase patterns as a new user ({args.duration_s:.0f} s, board "
            "scope, no profile): work vs the guessed PPW clock on that clock's board energy"
        )
    else:
        print(
            f"## Battery on held-out phase patterns ({args.duration_s:.0f} s, board scope): "
            "work vs the best constant clock that lasts the pattern's own budget"
        )
    head = " | ".join(f"{p} {'ticks' if t else 'no ticks'}" for p in patterns for t in modes)
    print(f"| board | {head} |")
    print("|---|" + "---:|" * (len(patterns) * len(modes)))
    cols = {(p, t): [] for p in patterns for t in modes}
    over = []
    for board in boards:
        doc = None if args.new_user else cache.profile(board)
        cells = []
        for p in patterns:
            for t in modes:
                if args.new_user:
                    ratio, used = run_new_user(board, p, args.duration_s, t)
                else:
                    ratio, used = run(board, doc, p, args.duration_s, t, cache)
                cols[(p, t)].append(ratio)
                over.append(used)
                cells.append(f"{ratio:.4f}")
        print(f"| {board} | " + " | ".join(cells) + " |", flush=True)
    print()
    for (p, t), v in cols.items():
        below = sum(1 for x in v if x < 1.0)
        print(
            f"- {p} ({'ticks' if t else 'no ticks'}): min {min(v):.4f}, mean "
            f"{sum(v) / len(v):.4f}, below 1 on {below} of {len(v)} boards"
        )
    groups = {
        "compute and memory": [p for p in patterns if "idle" not in _loads(p)],
        "with waits, not ending in one": [
            p for p in patterns if "idle" in _loads(p) and _loads(p)[-1] != "idle"
        ],
        "ending in a wait": [p for p in patterns if _loads(p)[-1] == "idle"],
    }
    for name, group in groups.items():
        got = [x for p in group for t in modes for x in cols[(p, t)]]
        if got and len(got) < sum(len(v) for v in cols.values()):
            print(f"- {name}: min {min(got):.4f}, mean {sum(got) / len(got):.4f}")
    every = [x for v in cols.values() for x in v]
    print(
        f"- all: min {min(every):.4f}, mean {sum(every) / len(every):.4f}; "
        f"board energy / budget: max {max(over):.4f}"
    )


def _loads(pattern):
    """The loads of a phase list in order (``idle`` for a wait)."""
    return [load or "idle" for load, _ in phase_list(pattern)]


if __name__ == "__main__":
    main()
