"""Digest of every clock the governor asks for under the non-battery policies, for a refactor's A/B.

    python scripts/check_decisions.py [--boards a,b] [--policies a,b] [--duration-s S]
    python scripts/check_decisions.py --tree /path/to/other/checkout

The companion of ``check_battery_decisions.py`` (which covers the battery policy): a change
meant to leave the controllers' decisions alone must leave every clock as it was. This runs
missions on the simulated boards with the ``governor`` package of ``--tree`` (default: this
checkout), records every clock the governor asks the device for (``Governor._set_clock``),
and prints per mission a digest of those clocks and the work, energy, missed and skipped
frames at full precision, then one digest of all. Two trees that print the same last line
made the same decisions bit for bit. The profiles are calibrated by this checkout (the same
for both trees of an A/B).

Missions per board (``--policies``, default all; ``--duration-s`` replaces every mission's
length, whose default is the bench's for that policy):

- ``throughput``: the perception trace (60 s) as ``bench_runtime.py`` runs it (the
  simulated app ticks each frame and asks ``gov.admit()``), at 30 Hz with a frame needing
  45 % of its period at the top clock, seeds 0, 1 and 2, once more with ``margin=0.1``, and
  two held-out cameras (20 Hz at 0.6, 60 Hz at 0.3);
- ``power-cap``: caps at 50 % and 70 % of the top clock's power on the steady, bursty and
  step traces (120 s);
- ``floor``: throughput with a battery floor (60 s): the budget 1.2 and 0.8 times what the
  throughput policy alone uses on the board's input, the short one with an app that asks
  ``gov.admit()`` and one that does not;
- ``ppw``: with the calibrated profile on the steady, bursty and step traces, and without a
  profile (found online) on steady (60 s);
- ``clock``: the middle table clock on steady and bursty (60 s);
- ``max``, ``min`` (the clock policy at the lowest table clock): steady and bursty (60 s).

The throughput missions (``throughput``, ``floor``) run with the memory clock pinned at its
default on boards with a memory axis (``simulate(..., mem_clock_mhz=...)``, as
``--mem-clock`` pins it): the digest is the core clock's alone, as the other policies' are
(their profiles keep no (core, memory) pair, so their memory knob does not act; the
throughput policy's would try the next memory clock down). The second knob's decisions are
``scripts/bench_mem_throughput.py``'s and its tests'.

All catalog boards, all policies: about 3 minutes on one core, most of it calibrating the
profiles (two missions' worth of time per board is the rest).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

POLICIES = ("throughput", "power-cap", "floor", "ppw", "clock", "max", "min")

CHILD = r"""
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import logging
logging.getLogger("governor.runtime").addHandler(logging.NullHandler())
import governor
import governor.runtime.governor as G
import governor.runtime.simulate as sim
from governor.runtime.simulate import simulate
docs = json.load(open(sys.argv[2]))
policies = sys.argv[3].split(",")
duration = None if sys.argv[4] == "default" else float(sys.argv[4])
asked = []
real = G.Governor._set_clock
def record(self, clock_mhz, *, urgent):
    asked.append(repr(clock_mhz))
    return real(self, clock_mhz, urgent=urgent)
G.Governor._set_clock = record
total = hashlib.sha256()

def mission(board, doc, label, spec, trace, seconds, **kw):
    seconds = duration if duration is not None else seconds
    if spec["policy"] == "throughput" and pinned.get(board) is not None:
        kw.setdefault("mem_clock_mhz", pinned[board])  # the core clock alone (see the doc)
    asked.clear()
    r = simulate(board, spec, trace, seconds, profile=kw.pop("profile", doc), **kw)
    clocks = hashlib.sha256("\n".join(asked).encode()).hexdigest()[:12]
    line = (f"{board} {label} {trace} {clocks} {len(asked)} {r['work_done']!r} "
            f"{r['energy_j']!r} {r['board_energy_j']!r} {r['deadline_misses']} "
            f"{r['frames']} {r['frames_skipped']}")
    total.update(line.encode())
    print(line, flush=True)
    return r

def camera(rate_hz, load):
    sim.FRAME_RATE_HZ, sim.FRAME_LOAD = rate_hz, load

pinned = {}
for board, doc in docs.items():
    dev = governor.open_device(f"sim:{board}")
    clocks = dev.supported_clocks_mhz()
    if len(dev.supported_mem_clocks_mhz()) > 1:  # a memory axis: its default, pinned
        pinned[board] = dev.sample().mem_clock_mhz
    if "throughput" in policies:
        for seed in (0, 1, 2):
            spec = {"policy": "throughput", "rate_hz": 30.0}
            mission(board, doc, f"throughput-30hz-seed{seed}", spec, "perception-30hz", 60,
                    seed=seed)
        spec = {"policy": "throughput", "rate_hz": 30.0, "margin": 0.1}
        mission(board, doc, "throughput-30hz-margin0.1", spec, "perception-30hz", 60)
        for rate_hz, load in ((20.0, 0.6), (60.0, 0.3)):
            camera(rate_hz, load)
            spec = {"policy": "throughput", "rate_hz": rate_hz}
            mission(board, doc, f"throughput-{rate_hz:g}hz-load{load:g}", spec,
                    "perception-30hz", 60)
        camera(30.0, 0.45)
    if "power-cap" in policies:
        top = simulate(board, {"policy": "max"}, "steady", 20, profile=doc)["mean_power_w"]
        for share in (0.5, 0.7):
            for trace in ("steady", "bursty", "step"):
                spec = {"policy": "power-cap", "cap_w": share * top}
                mission(board, doc, f"power-cap-{share:g}", spec, trace, 120)
    if "floor" in policies:
        spec = {"policy": "throughput", "rate_hz": 30.0}
        alone = mission(board, doc, "floor-alone", spec, "perception-30hz", 60, scope="board")
        seconds = duration if duration is not None else 60.0
        floor = dict(spec, duration_s=seconds)
        mission(board, doc, "floor-ample", dict(floor, energy_j=1.2 * alone["energy_j"]),
                "perception-30hz", 60)
        for admit in (True, False):
            mission(board, doc, f"floor-short-{'asks' if admit else 'ignores'}",
                    dict(floor, energy_j=0.8 * alone["energy_j"]), "perception-30hz", 60,
                    admit=admit)
    if "ppw" in policies:
        for trace in ("steady", "bursty", "step"):
            mission(board, doc, "ppw", {"policy": "ppw"}, trace, 60)
        mission(board, doc, "ppw-online", {"policy": "ppw"}, "steady", 60, profile=False)
    for name, clock in (("clock", clocks[len(clocks) // 2]), ("min", clocks[0])):
        if name in policies:
            for trace in ("steady", "bursty"):
                mission(board, doc, name, {"policy": "clock", "clock_mhz": clock}, trace, 60)
    if "max" in policies:
        for trace in ("steady", "bursty"):
            mission(board, doc, "max", {"policy": "max"}, trace, 60)
print("all missions", total.hexdigest())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", default="", help="comma-separated boards (default: all)")
    parser.add_argument(
        "--policies",
        default="",
        help=f"comma-separated, of {', '.join(POLICIES)} (default: all)",
    )
    parser.add_argument(
        "--duration-s",
        type=float,
        default=None,
        help="every mission's length (default: the bench's per policy, 60 or 120 s)",
    )
    parser.add_argument(
        "--tree", type=Path, default=REPO, help="checkout whose governor package decides"
    )
    args = parser.parse_args()
    if not (args.tree / "governor" / "__init__.py").is_file():
        sys.exit(f"check_decisions: {args.tree} holds no governor package")
    if args.duration_s is not None and not args.duration_s >= 10.0:
        sys.exit("check_decisions: --duration-s must be at least 10")
    policies = [p for p in args.policies.split(",") if p] or list(POLICIES)
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        sys.exit(
            f"check_decisions: unknown policies {', '.join(unknown)}; "
            f"choose from {', '.join(POLICIES)}"
        )
    from decision_harness import run_missions

    seconds = "default" if args.duration_s is None else repr(args.duration_s)
    run_missions(
        "check_decisions",
        args.tree,
        args.boards,
        lambda profiles: [CHILD, str(args.tree), profiles, ",".join(policies), seconds],
    )


if __name__ == "__main__":
    main()
