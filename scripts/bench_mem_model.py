#!/usr/bin/env python3
"""Held-out error of the (core, memory) model of governor/models/memory.py on real data.

The GTX Titan X sweeps (tests/data/replay/titanx_<app>_mem{810,3505}.csv, gpuPTXModel data
set, INESC-ID, BSD-3-Clause: 16 core clocks at two memory clocks, power and time per run):
for every application and every measured row, :func:`fit_pairs` is fitted to the other rows
of that application and predicts the held-out row's time, power and energy. Prints a
markdown table of the mean and worst relative errors (docs/benchmarks/calibration-2d.md).

Run from the repository root: ``python scripts/bench_mem_model.py``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor.devices.replay_files import read_sweep  # noqa: E402
from governor.models.memory import fit_pairs  # noqa: E402

REPLAY = ROOT / "tests" / "data" / "replay"


def rows_of(app: str) -> list:
    rows = []
    for mem in (810.0, 3505.0):
        sweep = read_sweep(REPLAY / f"titanx_{app}_mem{mem:g}.csv")
        rows += [
            (float(f), mem, float(p), float(t))
            for f, p, t in zip(sweep.clock_mhz, sweep.power_w, sweep.time_s)
        ]
    return rows


def main() -> int:
    warnings.simplefilter("ignore")
    apps = sorted({p.name.split("_")[1] for p in REPLAY.glob("titanx_*_mem810.csv")})
    print("| app | rows | time mean / worst | power mean / worst | energy mean / worst |")
    print("|---|---:|---:|---:|---:|")
    every = {"time": [], "power": [], "energy": []}
    for app in apps:
        rows = rows_of(app)
        errs = {"time": [], "power": [], "energy": []}
        for i, (f, m, p, t) in enumerate(rows):
            train = rows[:i] + rows[i + 1 :]
            f_, m_, p_, t_ = zip(*train)
            model = fit_pairs(f_, m_, p_, t_)
            errs["time"].append(abs(model.time_s(f, m) / t - 1))
            errs["power"].append(abs(model.power_w(f, m) / p - 1))
            errs["energy"].append(abs(model.energy_j(f, m) / (p * t) - 1))
        cells = []
        for k in ("time", "power", "energy"):
            every[k] += errs[k]
            cells.append(f"{100 * sum(errs[k]) / len(errs[k]):.1f} / {100 * max(errs[k]):.1f} %")
        print(f"| {app} | {len(rows)} | " + " | ".join(cells) + " |")
    cells = [f"{100 * sum(v) / len(v):.1f} / {100 * max(v):.1f} %" for v in every.values()]
    print(f"| all | {len(every['time'])} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
