"""The cluster budget controller on simulated clusters, against static splits of the budget.

    python scripts/bench_cluster.py [--set design|held-out|all] [--budgets 0.5,0.65,0.8]
                                    [--seeds 0,1] [--duration-s 3600] [--period-s 10]

Each row is one mix (GPUs and jobs, ``governor cluster simulate``) at one budget, a share of
the sum of its GPUs' top caps, averaged over the seeds: the controller's total work over
uniform caps (budget / GPUs, clipped to each GPU's range: the issue's baseline), over the same
with what a clipped GPU cannot take shared by the others ("filled", a stronger baseline),
over caps proportional to top caps, and over the hindsight best static split; the most any
controller could get (the *oracle*: the true curves, split again the second a job or a burst
starts or ends) over the filled uniform caps, and the controller over the oracle; and the
peak, over every 1 s sample and seed, of the summed power and summed caps over the budget.
A budget below the sum of the GPUs' lowest caps is refused, as the service refuses it.

The *design* mixes are the ones the controller's defaults (the period, the learner's model
family and window, how unwanted watts are spread) were chosen on; the *held-out* mixes and
their seeds were not looked at before those choices were fixed. The targets (issue 45) are
checked on the held-out rows: work >= 1.10x uniform and >= 0.97x the best static split,
summed power <= 1.01x budget at every sample.
"""

from __future__ import annotations

import argparse
import sys
import time

from governor.devices.sim.catalog import get_board
from governor.fleet.cluster_sim import simulate_cluster

#: (name, GPUs, jobs, seeds): mixes the defaults were chosen on
DESIGN = (
    ("A", (("a100-sxm", 8), ("t4", 8)), (("compute", 6), ("memory", 6), ("bursty", 4))),
    (
        "B",
        (("h100-sxm", 4), ("a100-sxm", 4), ("l4", 8)),
        (("compute", 8), ("memory", 8), ("bursty", 8)),
    ),
)
DESIGN_SEEDS = (0, 1)
#: mixes held out: never run before the defaults were fixed
HELD_OUT = (
    ("C", (("a100-sxm", 8), ("h100-sxm", 8)), (("compute", 10), ("memory", 10), ("bursty", 6))),
    ("D", (("v100", 8), ("rtx-a6000", 8)), (("compute", 12), ("memory", 12), ("mixed", 8))),
    ("E", (("h100-pcie", 4), ("l4", 12)), (("compute", 6), ("memory", 10), ("bursty", 6))),
    (
        "F",
        (("a100-pcie", 6), ("rtx-a4000", 6), ("t4", 4)),
        (("compute", 8), ("memory", 6), ("mixed", 4), ("bursty", 4)),
    ),
)
#: added after E and F were run: most of their budgets at 50-80 % of their tops fall below
#: the sum of their lowest caps (refused), so two held-out mixes whose floors are under 50 %;
#: the controller was not changed after any held-out run
HELD_OUT_2 = (
    (
        "G",
        (("l4", 8), ("a100-sxm", 4), ("rtx-a6000", 4)),
        (("compute", 8), ("memory", 8), ("mixed", 4), ("bursty", 4)),
    ),
    ("H", (("h100-sxm", 8), ("l4", 8)), (("compute", 6), ("memory", 6), ("bursty", 6))),
)
HELD_OUT = HELD_OUT + HELD_OUT_2
HELD_OUT_SEEDS = (100, 101)


def _label(pairs) -> str:
    return ",".join(f"{k}:{n}" for k, n in pairs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("design", "held-out", "all"), default="all")
    ap.add_argument("--budgets", default="0.5,0.65,0.8")
    ap.add_argument("--seeds", default=None, help="override both sets' seeds (comma list)")
    ap.add_argument("--mixes", default=None, help="only these mixes (comma list: A,C...)")
    ap.add_argument("--duration-s", type=float, default=3600.0)
    ap.add_argument("--period-s", type=float, default=10.0)
    args = ap.parse_args(argv)
    shares = [float(x) for x in args.budgets.split(",")]
    sets = []
    if args.set in ("design", "all"):
        sets.append(("design", DESIGN, DESIGN_SEEDS))
    if args.set in ("held-out", "all"):
        sets.append(("held-out", HELD_OUT, HELD_OUT_SEEDS))
    print(
        "| set | mix | GPUs | jobs | budget | x uniform | x uniform filled | x proportional "
        "| x best static | oracle / uniform filled | x oracle | peak power / budget "
        "| peak caps / budget |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    misses = []
    t0 = time.time()
    for set_name, mixes, seeds in sets:
        if args.seeds:
            seeds = tuple(int(s) for s in args.seeds.split(","))
        for name, gpus, jobs in mixes:
            if args.mixes and name not in args.mixes.split(","):
                continue
            top = sum(n * get_board(b).power_limit_range_w[1] for b, n in gpus)
            least = sum(n * get_board(b).power_limit_range_w[0] for b, n in gpus)
            for share in shares:
                if share * top < least:
                    print(
                        f"| {set_name} | {name} | {_label(gpus)} | {_label(jobs)} | "
                        f"{100 * share:.0f} % ({share * top:.0f} W) | below the least budget, "
                        f"{least:.0f} W: refused |" + " |" * 7
                    )
                    continue
                sums = [0.0] * 6
                peak_p = peak_c = 0.0
                for seed in seeds:
                    r = simulate_cluster(
                        gpus,
                        jobs,
                        share * top,
                        args.duration_s,
                        seed=seed,
                        period_s=args.period_s,
                        oracle=True,
                    )
                    for k, base in enumerate(
                        (
                            r.work_uniform,
                            r.work_uniform_filled,
                            r.work_proportional,
                            r.work_best_static,
                        )
                    ):
                        sums[k] += base
                    sums[4] += r.work
                    sums[5] += r.work_oracle
                    peak_p = max(peak_p, r.peak_power_w / r.budget_w)
                    peak_c = max(peak_c, r.peak_caps_w / r.budget_w)
                ratios = [sums[4] / s for s in sums[:4]]
                ratios += [sums[5] / sums[1], sums[4] / sums[5]]
                print(
                    f"| {set_name} | {name} | {_label(gpus)} | {_label(jobs)} | "
                    f"{100 * share:.0f} % ({share * top:.0f} W) | "
                    + " | ".join(f"{x:.3f}" for x in ratios)
                    + f" | {peak_p:.3f} | {peak_c:.3f} |",
                    flush=True,
                )
                if set_name == "held-out" and (
                    ratios[0] < 1.10 or ratios[3] < 0.97 or peak_p > 1.01
                ):
                    misses.append(f"{name} at {100 * share:.0f} %")
    print(
        f"\n{time.time() - t0:.0f} s; held-out rows missing a target: {', '.join(misses) or 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
