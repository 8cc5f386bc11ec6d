"""A day of virtual time under the battery and throughput policies on a simulated board:
memory and the cost of a control period stay flat (not a timed test).

    python scripts/long_day.py [--board agx-orin] [--hours 24] [--interval-s 1]
                               [--policies battery,throughput]

For each policy, opens the simulated board with its compute load and governs it the way
``governor run`` does (a :class:`~governor.runtime.Governor` taking the board, restoring it at
the end), stepped on the board's virtual clock (``background=False``, one ``step()`` per
``--interval-s``), a frame reported per period for the throughput policy. Every virtual hour
it reads the process's RSS (``/proc/self/status``) and the time a control period took: its
median over the hour (wall time of each ``step()``: the other processes of a busy machine
preempt a few periods, which the median leaves out), the mean CPU time and the mean wall time.
Prints, per policy, the first and last hours and a few between; exits 1 if the last hour's
RSS or median time per period is more than ``--limit-pct`` (10 %) above the first hour's.

The policies (a day on an AGX Orin, a budget that cannot keep the top clock all day):
``battery``: 1.5 MJ for 24 h (17.4 W on average); ``throughput``: 30 frames/s with a 1.5 MJ
floor over 24 h.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import governor  # noqa: E402
from governor.runtime import Governor  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def policy_spec(name: str, hours: float) -> Dict[str, Any]:
    duration_s = hours * 3600.0
    budget_j = 1_500_000.0 * hours / 24.0
    if name == "battery":
        return {"policy": "battery", "energy_j": budget_j, "duration_s": duration_s}
    if name == "throughput":
        return {
            "policy": "throughput",
            "rate_hz": 30.0,
            "energy_j": budget_j,
            "duration_s": duration_s,
        }
    raise SystemExit(f"unknown policy {name!r}: battery or throughput")


def one_day(board: str, name: str, hours: float, interval_s: float) -> List[Dict[str, float]]:
    """Per virtual hour: RSS at its end (MiB), CPU and wall time per period (µs), steps."""
    spec = policy_spec(name, hours)
    dev = governor.open_device(f"sim:{board}")
    dev.run_workload("compute")
    per_hour = max(1, int(round(3600.0 / interval_s)))
    rows: List[Dict[str, float]] = []
    frames = 30.0 * interval_s
    try:
        with Governor(dev, spec, interval_s=interval_s, background=False) as gov:
            for hour in range(int(hours)):
                gc.collect()
                cpu0, wall0 = time.process_time(), time.perf_counter()
                each_ns = []
                for _ in range(per_hour):
                    t0 = time.perf_counter_ns()
                    if name == "throughput":
                        gov.tick(frames)
                    gov.step()
                    each_ns.append(time.perf_counter_ns() - t0)
                cpu1, wall1 = time.process_time(), time.perf_counter()
                each_ns.sort()
                status = gov.status()
                rows.append(
                    {
                        "hour": hour + 1,
                        "rss_mib": rss_mib(),
                        "cpu_us": (cpu1 - cpu0) / per_hour * 1e6,
                        "wall_us": (wall1 - wall0) / per_hour * 1e6,
                        "median_us": each_ns[len(each_ns) // 2] / 1e3,
                        "steps": float(status.get("steps") or 0),
                        "remaining_j": float(status.get("remaining_j") or 0.0),
                        "clock_mhz": float(status.get("clock_mhz") or 0.0),
                    }
                )
    finally:
        dev.stop_workload()
        dev.close()
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--board", default="agx-orin")
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--interval-s", type=float, default=1.0)
    parser.add_argument("--policies", default="battery,throughput")
    parser.add_argument("--limit-pct", type=float, default=10.0)
    args = parser.parse_args(argv)
    if not (2 <= args.hours <= 24 * 7) or not (0.01 <= args.interval_s <= 60):
        parser.error("--hours must be 2-168 and --interval-s 0.01-60")
    names = [n.strip() for n in args.policies.split(",") if n.strip()]
    for name in names:
        policy_spec(name, args.hours)
    print(
        f"a long day: sim:{args.board}, {args.hours:g} h of virtual time per policy, a control "
        f"period every {args.interval_s:g} s ({int(3600 / args.interval_s)} per hour)"
    )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f}"
    )
    failed = False
    print(
        "\n| policy | hour | RSS (MiB) | median per period (µs) | mean CPU per period (µs) | "
        "mean wall per period (µs) | clock (MHz) | budget left (kJ) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    verdicts = []
    for name in names:
        began = time.perf_counter()
        rows = one_day(args.board, name, args.hours, args.interval_s)
        took = time.perf_counter() - began
        for row in rows:
            if row["hour"] in sorted({1, 2, len(rows) // 2, len(rows) - 1, len(rows)}):
                print(
                    f"| {name} | {row['hour']:.0f} | {row['rss_mib']:.1f} | "
                    f"{row['median_us']:.0f} | {row['cpu_us']:.0f} | {row['wall_us']:.0f} | {row['clock_mhz']:.0f} | "
                    f"{row['remaining_j'] / 1000.0:.1f} |"
                )
        first, last = rows[0], rows[-1]
        rss_pct = (last["rss_mib"] - first["rss_mib"]) / first["rss_mib"] * 100.0
        cpu_pct = (last["cpu_us"] - first["cpu_us"]) / first["cpu_us"] * 100.0
        med_pct = (last["median_us"] - first["median_us"]) / first["median_us"] * 100.0
        ok = rss_pct <= args.limit_pct and med_pct <= args.limit_pct
        failed = failed or not ok
        verdicts.append(
            f"{name}: last hour vs first: RSS {rss_pct:+.1f} %, median per period "
            f"{med_pct:+.1f} % ({'within' if ok else 'OVER'} {args.limit_pct:g} %; mean CPU "
            f"{cpu_pct:+.1f} %); {took:.0f} s to run"
        )
    print()
    for line in verdicts:
        print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
